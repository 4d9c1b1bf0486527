// Attention (see attention.h): the fp64 reference, the unfused algorithm (OpenBLAS GEMMs per (b, h)
// on the kernel threads, our softmax and dropout on P), and the algorithm table. The fused one is in
// flash_attention.cpp.
#include "kernels/cpu/seq/attention.h"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/common/philox.h"
#include "kernels/cpu/seq/dropout.h"
#include "kernels/cpu/seq/softmax.h"
#include "kernels/cpu/threads.h"

namespace dlb::cpu::seq {

void Attn::check() const {
  if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0)
    throw std::invalid_argument("attention: sizes must be positive (B " + std::to_string(B) + ", H " +
                                std::to_string(H) + ", Tq " + std::to_string(Tq) + ", Tk " + std::to_string(Tk) +
                                ", D " + std::to_string(D) + ")");
  if (!(dropout >= 0 && dropout < 1)) throw std::invalid_argument("attention: dropout must be in [0, 1)");
}

double Attn::flops_forward() const {
  double pairs = double(Tq) * Tk;
  if (causal) {  // row i sees min(i + 1, Tk) keys
    const double full = std::max(0, Tq - Tk);  // rows past Tk see all of them
    const double tri = std::min(Tq, Tk);
    pairs = tri * (tri + 1) / 2 + full * Tk;
  }
  return 4.0 * B * H * D * pairs;
}

// ---- fp64 reference ----
namespace {
// P (after dropout, as O uses it) and the dropout factor per element (0 or 1/(1-p)) of one (b, h).
void ref_probs(const Attn& a, int b, int h, HeadsView<const double> q, HeadsView<const double> k,
               std::vector<double>& p, std::vector<double>& keep) {
  const int Tq = a.Tq, Tk = a.Tk, D = a.D;
  const double* qb = q.at(b, h);
  const double* kb = k.at(b, h);
  p.assign(std::size_t(Tq) * Tk, 0.0);
  keep.assign(p.size(), 1.0);
  for (int i = 0; i < Tq; ++i) {
    const int n = softmax_valid_cols(i, Tk, a.causal ? Tq : 0);
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int d = 0; d < D; ++d) s += qb[i * q.st + d] * kb[j * k.st + d];
      p[std::size_t(i) * Tk + j] = s * a.sc();
    }
    softmax_forward_ref(&p[std::size_t(i) * Tk], &p[std::size_t(i) * Tk], 1, n, 0);
  }
  if (a.dropout > 0) {
    std::vector<std::uint8_t> m(p.size());
    dropout_mask_ref(m.data(), m.size(), a.dropout, a.seed, a.offset + (std::uint64_t(b) * a.H + h) * p.size());
    for (std::size_t e = 0; e < p.size(); ++e) keep[e] = m[e] ? 1.0 / (1.0 - a.dropout) : 0.0;
  }
}
}  // namespace

void attention_forward_ref(const Attn& a, HeadsView<const double> q, HeadsView<const double> k,
                           HeadsView<const double> v, HeadsView<double> o) {
  a.check();
  std::vector<double> p, keep;
  for (int b = 0; b < a.B; ++b)
    for (int h = 0; h < a.H; ++h) {
      ref_probs(a, b, h, q, k, p, keep);
      const double* vb = v.at(b, h);
      double* ob = o.at(b, h);
      for (int i = 0; i < a.Tq; ++i)
        for (int d = 0; d < a.D; ++d) {
          double s = 0;
          for (int j = 0; j < a.Tk; ++j)
            s += p[std::size_t(i) * a.Tk + j] * keep[std::size_t(i) * a.Tk + j] * vb[j * v.st + d];
          ob[i * o.st + d] = s;
        }
    }
}

void attention_backward_ref(const Attn& a, HeadsView<const double> q, HeadsView<const double> k,
                            HeadsView<const double> v, HeadsView<const double> dout, HeadsView<double> dq,
                            HeadsView<double> dk, HeadsView<double> dv) {
  a.check();
  const int Tq = a.Tq, Tk = a.Tk, D = a.D;
  std::vector<double> p, keep, dp(std::size_t(Tq) * Tk);
  for (int b = 0; b < a.B; ++b)
    for (int h = 0; h < a.H; ++h) {
      ref_probs(a, b, h, q, k, p, keep);
      const double *qb = q.at(b, h), *kb = k.at(b, h), *vb = v.at(b, h), *gb = dout.at(b, h);
      double *dqb = dq.at(b, h), *dkb = dk.at(b, h), *dvb = dv.at(b, h);
      for (int j = 0; j < Tk; ++j)
        for (int d = 0; d < D; ++d) {
          double s = 0;
          for (int i = 0; i < Tq; ++i)
            s += p[std::size_t(i) * Tk + j] * keep[std::size_t(i) * Tk + j] * gb[i * dout.st + d];
          dvb[j * dv.st + d] = s;
        }
      for (int i = 0; i < Tq; ++i) {
        double rowdot = 0;
        for (int j = 0; j < Tk; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += gb[i * dout.st + d] * vb[j * v.st + d];
          dp[std::size_t(i) * Tk + j] = s * keep[std::size_t(i) * Tk + j];
          rowdot += dp[std::size_t(i) * Tk + j] * p[std::size_t(i) * Tk + j];
        }
        for (int j = 0; j < Tk; ++j) {
          const std::size_t e = std::size_t(i) * Tk + j;
          dp[e] = p[e] * (dp[e] - rowdot) * a.sc();  // dS, scaled
        }
      }
      for (int i = 0; i < Tq; ++i)
        for (int d = 0; d < D; ++d) {
          double s = 0;
          for (int j = 0; j < Tk; ++j) s += dp[std::size_t(i) * Tk + j] * kb[j * k.st + d];
          dqb[i * dq.st + d] = s;
        }
      for (int j = 0; j < Tk; ++j)
        for (int d = 0; d < D; ++d) {
          double s = 0;
          for (int i = 0; i < Tq; ++i) s += dp[std::size_t(i) * Tk + j] * qb[i * q.st + d];
          dkb[j * dk.st + d] = s;
        }
    }
}

// ---- unfused: batched GEMMs + softmax ----
namespace {
void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, long lda, const float* b, long ldb,
          float* c, long ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              int(lda), b, int(ldb), 0.f, c, int(ldc));
}
// fn(b, h, bh) for every head, the heads as tasks on the kernel threads (OpenBLAS single-threaded
// inside each).
template <class F>
void each_head(const Attn& a, F&& fn) {
  parallel_tasks(a.B * a.H, [&](int bh) { fn(bh / a.H, bh % a.H, bh); });
}
std::uint64_t drop_offset(const Attn& a, int bh) { return a.offset + std::uint64_t(bh) * a.Tq * a.Tk; }
}  // namespace

void attention_forward_unfused(const Attn& a, CView q, CView k, CView v, MView o, AttnSaved& s) {
  a.check();
  const std::size_t TT = std::size_t(a.Tq) * a.Tk;
  s.probs.resize(TT * a.B * a.H);
  s.lse.clear();
  each_head(a, [&](int b, int h, int bh) {
    float* p = s.probs.data() + bh * TT;
    gemm(false, true, a.Tq, a.Tk, a.D, a.sc(), q.at(b, h), q.st, k.at(b, h), k.st, p, a.Tk);
    softmax_forward(p, p, a.Tq, a.Tk, a.causal ? a.Tq : 0);
    const float* pd = p;
    thread_local std::vector<float> dropped;
    if (a.dropout > 0) {
      dropped.resize(TT);
      dropout_forward(p, dropped.data(), nullptr, TT, a.dropout, a.seed, drop_offset(a, bh));
      pd = dropped.data();
    }
    gemm(false, false, a.Tq, a.D, a.Tk, 1.f, pd, a.Tk, v.at(b, h), v.st, o.at(b, h), o.st);
  });
}

void attention_backward_unfused(const Attn& a, CView q, CView k, CView v, CView, CView dout, const AttnSaved& s,
                                MView dq, MView dk, MView dv) {
  a.check();
  const std::size_t TT = std::size_t(a.Tq) * a.Tk;
  if (s.probs.size() != TT * a.B * a.H)
    throw std::invalid_argument("attention_backward_unfused: P is not this shape's");
  each_head(a, [&](int b, int h, int bh) {
    const float* p = s.probs.data() + bh * TT;
    thread_local std::vector<float> ws;  // dP [Tq, Tk], and P after dropout
    ws.resize(TT * (a.dropout > 0 ? 2 : 1));
    float* dp = ws.data();
    const float* pd = p;
    if (a.dropout > 0) {
      dropout_forward(p, dp + TT, nullptr, TT, a.dropout, a.seed, drop_offset(a, bh));
      pd = dp + TT;
    }
    gemm(true, false, a.Tk, a.D, a.Tq, 1.f, pd, a.Tk, dout.at(b, h), dout.st, dv.at(b, h), dv.st);  // dV = P^T dO
    gemm(false, true, a.Tq, a.Tk, a.D, 1.f, dout.at(b, h), dout.st, v.at(b, h), v.st, dp, a.Tk);     // dP = dO V^T
    if (a.dropout > 0) dropout_backward(dp, dp, TT, a.dropout, a.seed, drop_offset(a, bh));
    softmax_backward(p, dp, dp, a.Tq, a.Tk, a.causal ? a.Tq : 0);                                   // dS
    gemm(false, false, a.Tq, a.D, a.Tk, a.sc(), dp, a.Tk, k.at(b, h), k.st, dq.at(b, h), dq.st);    // dQ = s dS K
    gemm(true, false, a.Tk, a.D, a.Tq, a.sc(), dp, a.Tk, q.at(b, h), q.st, dk.at(b, h), dk.st);     // dK = s dS^T Q
  });
}

const std::vector<AttnAlgo>& attention_algos() {
  static const std::vector<AttnAlgo> v = {
      {"unfused", attention_forward_unfused, attention_backward_unfused, true},
      {"flash", attention_forward_flash, attention_backward_flash, false},
  };
  return v;
}

const AttnAlgo& attention_algo(const std::string& name) {
  for (const AttnAlgo& a : attention_algos())
    if (name == a.name) return a;
  throw std::invalid_argument("attention: no algorithm '" + name + "' (unfused, flash)");
}

}  // namespace dlb::cpu::seq
