// Recurrent layers, tanh RNN and LSTM (see rnn.h): the fp64 reference, the fused cell bodies over the
// vector width, and the dispatch around small_gemm / OpenBLAS GEMMs (bf16 GEMMs under autocast:
// RnnShape::bf16).
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/rnn.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/seq/small_gemm.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void RnnShape::check() const {
  if (T <= 0 || B <= 0 || I <= 0 || H <= 0)
    throw std::invalid_argument("rnn: sizes must be positive (T " + std::to_string(T) + ", B " + std::to_string(B) +
                                ", I " + std::to_string(I) + ", H " + std::to_string(H) + ")");
}

std::size_t rnn_saved_floats(const RnnShape& s) {
  const std::size_t states = std::size_t(s.T + 1) * s.B * s.H;
  return std::size_t(s.rows()) * s.gates() * s.H + states * (s.cell == RnnCell::lstm ? 2 : 1);
}

// ---- fp64 reference ----
namespace {
double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

// Every step's activated gates [T][B][G*H], h [T+1][B][H] and c [T+1][B][H].
struct RefStates {
  std::vector<double> gates, h, c;
};

RefStates ref_run(const RnnShape& s, const RnnWeightsRef& w, const double* x, const double* h0, const double* c0) {
  s.check();
  const int B = s.B, I = s.I, H = s.H, GH = s.gates() * H;
  const bool lstm = s.cell == RnnCell::lstm;
  RefStates st;
  st.gates.assign(std::size_t(s.T) * B * GH, 0.0);
  st.h.assign(std::size_t(s.T + 1) * B * H, 0.0);
  st.c.assign(st.h.size(), 0.0);
  if (h0) std::copy(h0, h0 + B * H, st.h.begin());
  if (c0 && lstm) std::copy(c0, c0 + B * H, st.c.begin());
  std::vector<double> a(GH);
  for (int t = 0; t < s.T; ++t)
    for (int b = 0; b < B; ++b) {
      const double* xr = x + s.row(t, b) * I;
      const double* hp = &st.h[(std::size_t(t) * B + b) * H];
      for (int k = 0; k < GH; ++k) {
        double v = (w.b_ih ? w.b_ih[k] : 0.0) + (w.b_hh ? w.b_hh[k] : 0.0);
        for (int i = 0; i < I; ++i) v += w.w_ih[std::size_t(k) * I + i] * xr[i];
        for (int j = 0; j < H; ++j) v += w.w_hh[std::size_t(k) * H + j] * hp[j];
        a[k] = v;
      }
      double* g = &st.gates[(std::size_t(t) * B + b) * GH];
      double* h = &st.h[(std::size_t(t + 1) * B + b) * H];
      for (int j = 0; j < H; ++j) {
        if (!lstm) {
          h[j] = g[j] = std::tanh(a[j]);
          continue;
        }
        g[j] = sigmoid(a[j]), g[H + j] = sigmoid(a[H + j]), g[2 * H + j] = std::tanh(a[2 * H + j]);
        g[3 * H + j] = sigmoid(a[3 * H + j]);
        const double c = g[H + j] * st.c[(std::size_t(t) * B + b) * H + j] + g[j] * g[2 * H + j];
        st.c[(std::size_t(t + 1) * B + b) * H + j] = c;
        h[j] = g[3 * H + j] * std::tanh(c);
      }
    }
  return st;
}
}  // namespace

void rnn_forward_ref(const RnnShape& s, const RnnWeightsRef& w, const double* x, const double* h0, const double* c0,
                     double* y, double* hn, double* cn) {
  const RefStates st = ref_run(s, w, x, h0, c0);
  const std::size_t BH = std::size_t(s.B) * s.H;
  for (int t = 0; t < s.T; ++t)
    for (int b = 0; b < s.B; ++b)
      std::copy_n(&st.h[(t + 1) * BH + std::size_t(b) * s.H], s.H, y + s.row(t, b) * s.H);
  if (hn) std::copy_n(&st.h[s.T * BH], BH, hn);
  if (cn && s.cell == RnnCell::lstm) std::copy_n(&st.c[s.T * BH], BH, cn);
}

void rnn_backward_ref(const RnnShape& s, const RnnWeightsRef& w, const double* x, const double* h0, const double* c0,
                      const double* dy, const double* dhn, const double* dcn, double* dx, double* dh0, double* dc0,
                      const RnnGradsRef& g) {
  const RefStates st = ref_run(s, w, x, h0, c0);
  const int B = s.B, I = s.I, H = s.H, GH = s.gates() * H;
  const bool lstm = s.cell == RnnCell::lstm;
  std::vector<double> dh(std::size_t(B) * H, 0.0), dc(dh.size(), 0.0), dhp(dh.size()), da(GH);
  std::vector<double> dwih(std::size_t(GH) * I, 0.0), dwhh(std::size_t(GH) * H, 0.0), db(GH, 0.0);
  if (dhn) std::copy_n(dhn, dh.size(), dh.begin());
  if (dcn && lstm) std::copy_n(dcn, dc.size(), dc.begin());
  for (int t = s.T - 1; t >= 0; --t) {
    std::fill(dhp.begin(), dhp.end(), 0.0);
    for (int b = 0; b < B; ++b) {
      const long r = s.row(t, b);
      const double* gt = &st.gates[(std::size_t(t) * B + b) * GH];
      const double* hp = &st.h[(std::size_t(t) * B + b) * H];
      for (int j = 0; j < H; ++j) {
        const double dhj = dh[std::size_t(b) * H + j] + (dy ? dy[r * H + j] : 0.0);
        if (!lstm) {
          da[j] = dhj * (1 - gt[j] * gt[j]);
          continue;
        }
        const double i = gt[j], f = gt[H + j], gg = gt[2 * H + j], o = gt[3 * H + j];
        const double c = st.c[(std::size_t(t + 1) * B + b) * H + j], cp = st.c[(std::size_t(t) * B + b) * H + j];
        const double tc = std::tanh(c), dct = dc[std::size_t(b) * H + j] + dhj * o * (1 - tc * tc);
        da[j] = dct * gg * i * (1 - i);
        da[H + j] = dct * cp * f * (1 - f);
        da[2 * H + j] = dct * i * (1 - gg * gg);
        da[3 * H + j] = dhj * tc * o * (1 - o);
        dc[std::size_t(b) * H + j] = dct * f;
      }
      for (int k = 0; k < GH; ++k) {
        db[k] += da[k];
        for (int i = 0; i < I; ++i) dwih[std::size_t(k) * I + i] += da[k] * x[r * I + i];
        for (int j = 0; j < H; ++j) {
          dwhh[std::size_t(k) * H + j] += da[k] * hp[j];
          dhp[std::size_t(b) * H + j] += da[k] * w.w_hh[std::size_t(k) * H + j];
        }
      }
      if (dx)
        for (int i = 0; i < I; ++i) {
          double v = 0;
          for (int k = 0; k < GH; ++k) v += da[k] * w.w_ih[std::size_t(k) * I + i];
          dx[r * I + i] = v;
        }
    }
    dh.swap(dhp);
  }
  if (dh0) std::copy(dh.begin(), dh.end(), dh0);
  if (dc0 && lstm) std::copy(dc.begin(), dc.end(), dc0);
  if (g.dw_ih) std::copy(dwih.begin(), dwih.end(), g.dw_ih);
  if (g.dw_hh) std::copy(dwhh.begin(), dwhh.end(), g.dw_hh);
  if (g.db_ih) std::copy(db.begin(), db.end(), g.db_ih);
  if (g.db_hh) std::copy(db.begin(), db.end(), g.db_hh);
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/rnn.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

// ---- the fast path ----
namespace dlb::cpu::seq {
namespace {
// A [rows x cols] block with leading dimension ld, rounded to bf16 into `out` (leading dimension ld).
const std::uint16_t* to_bf16(const float* a, long rows, long cols, long ld, std::vector<std::uint16_t>& out) {
  out.resize(std::size_t(rows - 1) * ld + cols);
  for (long r = 0; r < rows; ++r) cast_fp32_to_bf16(a + r * ld, out.data() + r * ld, std::size_t(cols));
  return out.data();
}
// The weights of one call rounded to bf16 once (RnnShape::bf16), not once per step.
struct Bf16Weights {
  const std::uint16_t *ih = nullptr, *hh = nullptr;
  Bf16Weights(const RnnShape& s, const RnnWeights& w) {
    if (!s.bf16) return;
    thread_local std::vector<std::uint16_t> wih, whh;
    const long GH = long(s.gates()) * s.H;
    ih = to_bf16(w.w_ih, GH, s.I, s.I, wih), hh = to_bf16(w.w_hh, GH, s.H, s.H, whh);
  }
};
// C = op(A) op(B) (+ C with beta 1), row-major with leading dimensions: sgemm, or with bf16 (the
// shape's) bf16_gemm on A and B rounded to bf16 (b16: B's bf16 copy made already, the weights).
void gemm(bool bf16, bool ta, bool tb, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
          float beta, float* c, long ldc, const std::uint16_t* b16 = nullptr) {
  if (!bf16) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.f, a, int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
  thread_local std::vector<std::uint16_t> a16, b16s;
  Bf16GemmArgs g;
  g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.beta = beta, g.c = c;
  g.a = to_bf16(a, ta ? k : m, ta ? m : k, lda, a16);
  g.b = b16 ? b16 : to_bf16(b, tb ? n : k, tb ? k : n, ldb, b16s);
  bf16_gemm(g);
}
// Which GEMM runs each product (measured in docs/notes/2026-11-26-seq-models.md, "Small-batch LSTM"):
//   fp32: small_gemm (B as [k x n]: W_hh, W_ih, or their transposes made once a call)
//     - the whole-sequence products (input part forward, dx backward) at any size,
//     - the per-step recurrent products from kSmallGemmMinRows batch rows up,
//     - the weight gradients (A = dA^T, k = T B rows) up to kSmallGemmMaxK rows;
//   else sgemm (OpenBLAS's small-matrix path at 1-3 rows; its blocking beyond kSmallGemmMaxK);
//   bf16 autocast: bf16_gemm throughout.
struct Dispatch {
  bool seq, step, grad;  // small_gemm for the sequence products, the per-step ones, the weight gradients
  explicit Dispatch(const RnnShape& s)
      : seq(!s.bf16), step(!s.bf16 && s.B >= kSmallGemmMinRows), grad(!s.bf16 && s.rows() <= kSmallGemmMaxK) {}
};
// The recurrence's tasks: row b of h_t needs only row b of h_{t-1} (and of c, dh, dc), so the batch
// rows split over tasks that each run every step on their rows, one parallel region a sequence
// instead of two a step, and a task's gates, states and gradients stay in its core's cache (the
// per-step path splits the GEMM by columns and the cells by rows, so every step's rows cross cores).
// At least 8 rows a task (the GEMM tile's rows at AVX-512), at most a task per thread; 1: the
// per-step path. Zen 4, 2 threads, 4 runs alternating with the per-step binary
// (docs/notes/2026-11-27-audit.md): batch 64 rnn 1.13-1.20x, lstm 1.03-1.14x its tokens/s (batch 8,
// the same path in both: 0.96-1.12x, the noise); 4-row tasks at batch 8 lost on the rnn (0.85-0.93x).
int recurrence_tasks(long B) { return int(std::clamp<long>(B / 8, 1, kernel_threads())); }

// W [rows x cols] -> W^T [cols x rows] into `out` (thread-local scratch), for small_gemm's B.
const float* transposed(const float* w, long rows, long cols, std::vector<float>& out) {
  out.resize(std::size_t(rows) * cols);
  cblas_somatcopy(CblasRowMajor, CblasTrans, int(rows), int(cols), 1.f, w, int(cols), out.data(), int(rows));
  return out.data();
}
}  // namespace

void rnn_forward(const RnnShape& s, const RnnWeights& w, const float* x, const float* h0, const float* c0, float* y,
                 float* hn, float* cn, std::vector<float>& saved) {
  s.check();
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;  // rows between b and b+1 of a step
  const bool lstm = s.cell == RnnCell::lstm;
  saved.resize(rnn_saved_floats(s));
  float* const gates = saved.data();
  float* const hs = gates + N * GH;
  float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  thread_local std::vector<float> bsum;
  bsum.assign(GH, 0.f);
  for (int k = 0; k < GH; ++k) bsum[k] = (w.b_ih ? w.b_ih[k] : 0.f) + (w.b_hh ? w.b_hh[k] : 0.f);
  const float* const bias = bsum.data();
  if (h0) std::copy_n(h0, BH, hs);
  else std::fill_n(hs, BH, 0.f);
  if (lstm && c0) std::copy_n(c0, BH, cs);
  else if (lstm) std::fill_n(cs, BH, 0.f);

  const Bf16Weights w16(s, w);
  const Dispatch use(s);
  thread_local std::vector<float> wih_t, whh_t;  // W_ih^T [I][GH], W_hh^T [H][GH] for small_gemm
  if (use.seq)  // every step's input part at once
    small_gemm(false, N, GH, s.I, x, s.I, transposed(w.w_ih, GH, s.I, wih_t), GH, false, gates, GH);
  else gemm(s.bf16, false, true, N, GH, s.I, x, s.I, w.w_ih, s.I, 0.f, gates, GH, w16.ih);
  const float* const whh = use.step ? transposed(w.w_hh, GH, H, whh_t) : nullptr;
  const auto lstm_body = DLB_ISA_PICK(lstm_cell_forward);
  const auto tanh_body = DLB_ISA_PICK(tanh_cell_forward);
  auto cells = [&](int t, long lo, long hi) {  // step t's cells of batch rows [lo, hi)
    float* const gt = gates + s.row(t, 0) * GH;
    for (long b = lo; b < hi; ++b) {
      float* const h = hs + (t + 1) * BH + b * H;
      if (lstm) lstm_body(gt + b * rs * GH, bias, cs + t * BH + b * H, cs + (t + 1) * BH + b * H, h, H);
      else tanh_body(gt + b * rs * GH, bias, h, H);
      std::copy_n(h, H, y + s.row(t, int(b)) * H);
    }
  };
  const int tasks = use.step ? recurrence_tasks(B) : 1;
  if (tasks > 1) {  // each task runs every step for its batch rows (recurrence_tasks)
    auto rows = [&](int task) {
      long lo, hi;
      split_range(B, tasks, task, lo, hi);
      for (int t = 0; t < s.T; ++t) {  // += W_hh h_{t-1}, rows [lo, hi)
        small_gemm_serial(false, hi - lo, GH, H, hs + t * BH + lo * H, H, whh, GH, true,
                          gates + (s.row(t, 0) + lo * rs) * GH, rs * GH);
        cells(t, lo, hi);
      }
    };
    parallel_tasks(tasks, rows);
  } else {
    for (int t = 0; t < s.T; ++t) {
      float* const gt = gates + s.row(t, 0) * GH;
      if (use.step) small_gemm(false, B, GH, H, hs + t * BH, H, whh, GH, true, gt, rs * GH);  // += W_hh h_{t-1}
      else gemm(s.bf16, false, true, B, GH, H, hs + t * BH, H, w.w_hh, H, 1.f, gt, rs * GH, w16.hh);
      parallel_rows(B, 3L * GH, [&](long lo, long hi) { cells(t, lo, hi); });
    }
  }
  if (hn) std::copy_n(hs + s.T * BH, BH, hn);
  if (cn && lstm) std::copy_n(cs + s.T * BH, BH, cn);
}

void rnn_backward(const RnnShape& s, const RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const std::vector<float>& saved, float* dx, float* dh0, float* dc0,
                  const RnnGrads& g) {
  s.check();
  if (saved.size() != rnn_saved_floats(s)) throw std::invalid_argument("rnn_backward: `saved` is not this shape's");
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;
  const bool lstm = s.cell == RnnCell::lstm;
  const float* const gates = saved.data();
  const float* const hs = gates + N * GH;
  const float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  thread_local std::vector<float> scratch;  // dA [N][GH] (x's row order), dh [B][H], dc [B][H]
  scratch.resize(std::size_t(N) * GH + 2 * BH);
  float* const da = scratch.data();
  float* const dh = da + N * GH;
  float* const dc = dh + BH;
  if (dhn) std::copy_n(dhn, BH, dh);
  else std::fill_n(dh, BH, 0.f);
  if (dcn && lstm) std::copy_n(dcn, BH, dc);
  else std::fill_n(dc, BH, 0.f);

  const Bf16Weights w16(s, w);
  const auto lstm_body = DLB_ISA_PICK(lstm_cell_backward);
  const auto tanh_body = DLB_ISA_PICK(tanh_cell_backward);
  const Dispatch use(s);
  auto cells = [&](int t, long lo, long hi) {  // step t's cells of batch rows [lo, hi)
    for (long b = lo; b < hi; ++b) {
      const long r = s.row(t, int(b));
      const float* dyr = dy ? dy + r * H : nullptr;
      if (lstm)
        lstm_body(gates + r * GH, cs + t * BH + b * H, cs + (t + 1) * BH + b * H, dyr, dh + b * H, dc + b * H,
                  da + r * GH, H);
      else tanh_body(hs + (t + 1) * BH + b * H, dyr, dh + b * H, da + r * GH, H);
    }
  };
  const int tasks = use.step ? recurrence_tasks(B) : 1;
  if (tasks > 1) {  // each task runs every step for its batch rows (recurrence_tasks)
    auto rows = [&](int task) {
      long lo, hi;
      split_range(B, tasks, task, lo, hi);
      for (int t = s.T - 1; t >= 0; --t) {
        cells(t, lo, hi);
        if (t == 0 && !dh0) break;  // dh_{-1} is wanted only as dh0
        // dh_{t-1} = dA_t W_hh, rows [lo, hi)
        small_gemm_serial(false, hi - lo, H, GH, da + (s.row(t, 0) + lo * rs) * GH, rs * GH, w.w_hh, H, false,
                          dh + lo * H, H);
      }
    };
    parallel_tasks(tasks, rows);
  } else {
    for (int t = s.T - 1; t >= 0; --t) {
      parallel_rows(B, 4L * GH, [&](long lo, long hi) { cells(t, lo, hi); });
      if (t == 0 && !dh0) break;  // dh_{-1} is wanted only as dh0
      const float* dat = da + s.row(t, 0) * GH;  // dh_{t-1} = dA_t W_hh
      if (use.step) small_gemm(false, B, H, GH, dat, rs * GH, w.w_hh, H, false, dh, H);
      else gemm(s.bf16, false, false, B, H, GH, dat, rs * GH, w.w_hh, H, 0.f, dh, H, w16.hh);
    }
  }
  if (dh0) std::copy_n(dh, BH, dh0);
  if (dc0 && lstm) std::copy_n(dc, BH, dc0);
  if (dx && use.seq) small_gemm(false, N, s.I, GH, da, GH, w.w_ih, s.I, false, dx, s.I);
  else if (dx) gemm(s.bf16, false, false, N, s.I, GH, da, GH, w.w_ih, s.I, 0.f, dx, s.I, w16.ih);
  const float beta = g.accumulate ? 1.f : 0.f;
  if (g.dw_ih && use.grad) small_gemm(true, GH, s.I, N, da, GH, x, s.I, g.accumulate, g.dw_ih, s.I);
  else if (g.dw_ih) gemm(s.bf16, true, false, GH, s.I, N, da, GH, x, s.I, beta, g.dw_ih, s.I);
  if (g.dw_hh) {
    const float* hp = hs;  // h_{t-1} in dA's row order: sum over the rows of dA^T h_{t-1}
    if (s.batch_first) {   // gathered (N H floats) so that it is one GEMM over K = N, not B of K = T
      thread_local std::vector<float> hprev;
      hprev.resize(std::size_t(N) * H);
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < s.T; ++t) std::copy_n(hs + t * BH + b * H, H, hprev.data() + s.row(t, b) * H);
      hp = hprev.data();
    }
    if (use.grad) small_gemm(true, GH, H, N, da, GH, hp, H, g.accumulate, g.dw_hh, H);
    else gemm(s.bf16, true, false, GH, H, N, da, GH, hp, H, beta, g.dw_hh, H);
  }
  if (g.db_ih || g.db_hh) {
    thread_local std::vector<float> dbs;
    dbs.assign(GH, 0.f);
    float* const db = dbs.data();
    const auto sums = DLB_ISA_PICK(column_sums);
    parallel_rows(GH, N, [&](long lo, long hi) { sums(da + lo, N, GH, hi - lo, db + lo); });
    for (float* out : {g.db_ih, g.db_hh})
      if (out)
        for (int k = 0; k < GH; ++k) out[k] = g.accumulate ? out[k] + db[k] : db[k];
  }
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// out[k] = the sum of a[r lda + k] over the rows r = 0, 1, ... in order (the bias gradient: dA's
// columns), k in [0, n): 4 vectors of sums stay in registers over a pass of the rows.
void column_sums(const float* a, long rows, long lda, long n, float* out) {
  constexpr int U = 4;
  for (long j = 0; j < n; j += U * V::L) {
    int lanes[U];
    vec s[U];
    for (int u = 0; u < U; ++u) {
      const long left = n - j - long(u) * V::L;
      lanes[u] = left <= 0 ? 0 : left < V::L ? int(left) : V::L;
      s[u] = V::zero();
    }
    for (long r = 0; r < rows; ++r) {
      const float* ar = a + r * lda + j;
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) s[u] = V::add(s[u], V::load_n(ar + u * V::L, lanes[u], 0.f));
    }
    for (int u = 0; u < U; ++u) V::store_n(out + j + u * V::L, s[u], lanes[u]);
  }
}

// One batch row of an LSTM step: a = [a_i a_f a_g a_o] (GEMMs' sums; + bias) -> the activated gates
// in place; c = f cp + i g, h = o tanh(c).
void lstm_cell_forward(float* a, const float* bias, const float* cp, float* c, float* h, int H) {
  for (int j = 0; j < H; j += V::L) {
    const int n = H - j < V::L ? H - j : V::L;
    const vec i = vsigmoid(V::add(V::load_n(a + j, n, 0.f), V::load_n(bias + j, n, 0.f)));
    const vec f = vsigmoid(V::add(V::load_n(a + H + j, n, 0.f), V::load_n(bias + H + j, n, 0.f)));
    const vec g = vtanh(V::add(V::load_n(a + 2 * H + j, n, 0.f), V::load_n(bias + 2 * H + j, n, 0.f)));
    const vec o = vsigmoid(V::add(V::load_n(a + 3 * H + j, n, 0.f), V::load_n(bias + 3 * H + j, n, 0.f)));
    const vec cn = V::fma(f, V::load_n(cp + j, n, 0.f), V::mul(i, g));
    V::store_n(a + j, i, n), V::store_n(a + H + j, f, n), V::store_n(a + 2 * H + j, g, n);
    V::store_n(a + 3 * H + j, o, n);
    V::store_n(c + j, cn, n);
    V::store_n(h + j, V::mul(o, vtanh(cn)), n);
  }
}

void tanh_cell_forward(float* a, const float* bias, float* h, int H) {
  for (int j = 0; j < H; j += V::L) {
    const int n = H - j < V::L ? H - j : V::L;
    const vec v = vtanh(V::add(V::load_n(a + j, n, 0.f), V::load_n(bias + j, n, 0.f)));
    V::store_n(a + j, v, n);
    V::store_n(h + j, v, n);
  }
}

// One batch row of an LSTM step backward. g: the activated gates; cp, c: c_{t-1}, c_t; dh: the
// recurrent gradient (+ dy when given); dc: in dc_t from step t+1, out dc_{t-1}; da: dA of the step.
void lstm_cell_backward(const float* g, const float* cp, const float* c, const float* dy, const float* dh, float* dc,
                        float* da, int H) {
  const vec one = V::set1(1.f);
  for (int j = 0; j < H; j += V::L) {
    const int n = H - j < V::L ? H - j : V::L;
    vec d = V::load_n(dh + j, n, 0.f);
    if (dy) d = V::add(d, V::load_n(dy + j, n, 0.f));
    const vec i = V::load_n(g + j, n, 0.f), f = V::load_n(g + H + j, n, 0.f);
    const vec gg = V::load_n(g + 2 * H + j, n, 0.f), o = V::load_n(g + 3 * H + j, n, 0.f);
    const vec tc = vtanh(V::load_n(c + j, n, 0.f));
    const vec dct = V::fma(V::mul(d, o), V::sub(one, V::mul(tc, tc)), V::load_n(dc + j, n, 0.f));
    V::store_n(da + j, V::mul(V::mul(dct, gg), V::mul(i, V::sub(one, i))), n);
    V::store_n(da + H + j, V::mul(V::mul(dct, V::load_n(cp + j, n, 0.f)), V::mul(f, V::sub(one, f))), n);
    V::store_n(da + 2 * H + j, V::mul(V::mul(dct, i), V::sub(one, V::mul(gg, gg))), n);
    V::store_n(da + 3 * H + j, V::mul(V::mul(d, tc), V::mul(o, V::sub(one, o))), n);
    V::store_n(dc + j, V::mul(dct, f), n);
  }
}

void tanh_cell_backward(const float* h, const float* dy, const float* dh, float* da, int H) {
  const vec one = V::set1(1.f);
  for (int j = 0; j < H; j += V::L) {
    const int n = H - j < V::L ? H - j : V::L;
    vec d = V::load_n(dh + j, n, 0.f);
    if (dy) d = V::add(d, V::load_n(dy + j, n, 0.f));
    const vec hv = V::load_n(h + j, n, 0.f);
    V::store_n(da + j, V::mul(d, V::sub(one, V::mul(hv, hv))), n);
  }
}

#endif
