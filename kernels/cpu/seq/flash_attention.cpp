// Fused attention on the CPU (see attention.h, algorithm "flash"): FlashAttention-2's loop order over
// query blocks of kBr rows and key blocks of kBc keys, the row max and sum carried online, the
// probabilities never leaving a kBr x kBc tile; backward recomputes each tile from the saved row
// log-sum-exp. The tile products run on tile_gemm.inc's register-blocked GEMM (8 rows x 2 vectors of
// accumulators at AVX-512, 6 at AVX2), compiled per ISA by foreach_isa.h.
// Napkin math per tile (forward): 4 kBr kBc D flops on a kBr x kBc tile that stays in L1
// (32 x 64 floats = 8 KB), K^T and V read once per query block (2 Tk D floats: 512 KB at Tk 1024,
// D 64, from L2).
#ifndef DLB_ISA_PASS
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/attention.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threads.h"

namespace dlb::cpu::seq {
namespace {
constexpr int kBr = 32;  // query rows a tile
constexpr int kBc = 64;  // keys a tile
}  // namespace
}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/flash_attention.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

void attention_forward_flash(const Attn& a, CView q, CView k, CView v, MView o, AttnSaved& s) {
  a.check();
  if (a.dropout > 0) throw std::invalid_argument("attention: flash has no dropout (use unfused)");
  s.probs.clear();
  s.lse.resize(std::size_t(a.B) * a.H * a.Tq);
  // K^T of every head first (one transpose per head, shared by its query blocks), then the
  // (head, query block) pairs as tasks.
  const std::size_t kt_head = std::size_t(a.D) * a.Tk;
  thread_local std::vector<float> kt;  // the calling thread's: tasks reach it through kt_all
  kt.resize(kt_head * a.B * a.H);
  float* const kt_all = kt.data();
  const auto transpose = DLB_ISA_PICK(transpose_keys);
  parallel_tasks(a.B * a.H, [&](int bh) {
    transpose(k.at(bh / a.H, bh % a.H), k.st, 0, a.Tk, a.D, a.Tk, kt_all + bh * kt_head);
  });
  const int blocks = (a.Tq + kBr - 1) / kBr;
  const auto body = DLB_ISA_PICK(flash_forward_block);
  parallel_tasks(a.B * a.H * blocks, [&](int t) {
    const int bh = t / blocks, i0 = (t % blocks) * kBr, b = bh / a.H, h = bh % a.H;
    thread_local std::vector<float> ws;
    ws.resize(kBr * kBc + kBr * a.D + 2 * kBr);
    body(a, q.at(b, h), q.st, kt_all + bh * kt_head, v.at(b, h), v.st, o.at(b, h), o.st,
         s.lse.data() + std::size_t(bh) * a.Tq, i0, ws.data());
  });
}

void attention_backward_flash(const Attn& a, CView q, CView k, CView v, CView o, CView dout, const AttnSaved& s,
                              MView dq, MView dk, MView dv) {
  a.check();
  if (s.lse.size() != std::size_t(a.B) * a.H * a.Tq)
    throw std::invalid_argument("attention_backward_flash: the saved log-sum-exp is not this shape's");
  const auto body = DLB_ISA_PICK(flash_backward_head);
  parallel_tasks(a.B * a.H, [&](int bh) {
    const int b = bh / a.H, h = bh % a.H;
    thread_local std::vector<float> ws;
    ws.resize(2 * std::size_t(a.D) * a.Tk + 2 * kBr * kBc + 2 * kBc * a.D + a.Tq);
    body(a, q.at(b, h), q.st, k.at(b, h), k.st, v.at(b, h), v.st, o.at(b, h), o.st, dout.at(b, h), dout.st,
         s.lse.data() + std::size_t(bh) * a.Tq, dq.at(b, h), dq.st, dk.at(b, h), dk.st, dv.at(b, h), dv.st, ws.data());
  });
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

#include "kernels/cpu/seq/tile_gemm.inc"  // mm: the tile products

// dst[d Tk + j] = src[j st + d] for keys [j0, j1): K^T (or V^T) of a head, 16 keys at a time so
// that each written line is filled by a run.
void transpose_keys(const float* src, long st, int j0, int j1, int D, int Tk, float* dst) {
  for (int jb = j0; jb < j1; jb += 16) {
    const int je = std::min(j1, jb + 16);
    for (int d = 0; d < D; ++d)
      for (int j = jb; j < je; ++j) dst[std::size_t(d) * Tk + j] = src[j * st + d];
  }
}

// Keys of a tile that row i sees: all bc, or (causal) those with index <= i.
inline int visible(const Attn& a, int i, int j0, int bc) { return a.causal ? std::clamp(i + 1 - j0, 0, bc) : bc; }

// One query block [i0, i0 + kBr) of one head: O rows and the rows' log-sum-exp. kt: the head's K^T
// [D][Tk]; ws: the tile [kBr][kBc], the O accumulator [kBr][D], the rows' max and sum.
void flash_forward_block(const Attn& a, const float* q, long qs, const float* kt, const float* v, long vs, float* o,
                         long os, float* lse, int i0, float* ws) {
  const int D = a.D, Tk = a.Tk, br = std::min(kBr, a.Tq - i0);
  const int jend = a.causal ? std::min(Tk, i0 + br) : Tk;  // keys the block's last row sees
  const float inf = std::numeric_limits<float>::infinity(), scale = a.sc();
  float* const p = ws;
  float* const acc = p + kBr * kBc;
  float* const m = acc + kBr * D;
  float* const l = m + kBr;
  std::fill(acc, acc + br * D, 0.f);
  std::fill(m, m + br, -inf);
  std::fill(l, l + br, 0.f);
  const vec sv = V::set1(scale);
  for (int j0 = 0; j0 < jend; j0 += kBc) {
    const int bc = std::min(kBc, jend - j0);
    mm(br, bc, D, q + i0 * qs, qs, 1, kt + j0, Tk, p, kBc, false);  // S = Q K^T
    for (int r = 0; r < br; ++r) {
      float* pr = p + r * kBc;
      const int n = visible(a, i0 + r, j0, bc);
      if (n == 0) {
        std::fill(pr, pr + bc, 0.f);
        continue;
      }
      vec mx = V::set1(-inf);
      for (int j = 0; j < n; j += V::L) mx = V::max(mx, V::mul(V::load_n(pr + j, n - j, -inf), sv));
      const float mnew = std::max(m[r], V::reduce_max(mx)), corr = std::exp(m[r] - mnew);
      const vec mv = V::set1(mnew);
      vec sum = V::zero();
      for (int j = 0; j < bc; j += V::L) {  // columns past the causal edge read as -inf: e = 0
        const int c = std::min(V::L, bc - j), valid = std::clamp(n - j, 0, c);
        const vec e = vexp(V::sub(V::mul(V::load_n(pr + j, valid, -inf), sv), mv));
        V::store_n(pr + j, e, c);
        sum = V::add(sum, e);
      }
      l[r] = l[r] * corr + V::reduce_add(sum);
      m[r] = mnew;
      if (corr != 1.f) {
        const vec cv = V::set1(corr);
        for (int d = 0; d < D; d += V::L) {
          const int c = std::min(V::L, D - d);
          V::store_n(acc + r * D + d, V::mul(V::load_n(acc + r * D + d, c, 0.f), cv), c);
        }
      }
    }
    mm(br, D, bc, p, kBc, 1, v + j0 * vs, vs, acc, D, true);  // O += P V
  }
  for (int r = 0; r < br; ++r) {
    const vec inv = V::set1(1.f / l[r]);
    for (int d = 0; d < D; d += V::L) {
      const int c = std::min(V::L, D - d);
      V::store_n(o + (i0 + r) * os + d, V::mul(V::load_n(acc + r * D + d, c, 0.f), inv), c);
    }
    lse[i0 + r] = m[r] + std::log(l[r]);
  }
}

// One head's dQ, dK, dV: key blocks outer (dK, dV accumulated in the tile), query blocks inner (dQ
// accumulated in place). ws: K^T, V^T [D][Tk], P and dS tiles, dK and dV accumulators [kBc][D],
// the rows' rowsum(dO * O) [Tq].
void flash_backward_head(const Attn& a, const float* q, long qs, const float* k, long ks, const float* v, long vs,
                         const float* o, long os, const float* g, long gs, const float* lse, float* dq, long dqs,
                         float* dk, long dks, float* dv, long dvs, float* ws) {
  const int D = a.D, Tk = a.Tk, Tq = a.Tq;
  const float scale = a.sc();
  float* const kt = ws;
  float* const vt = kt + std::size_t(D) * Tk;
  float* const p = vt + std::size_t(D) * Tk;
  float* const ds = p + kBr * kBc;
  float* const dka = ds + kBr * kBc;
  float* const dva = dka + kBc * D;
  float* const rowdot = dva + kBc * D;
  transpose_keys(k, ks, 0, Tk, D, Tk, kt);
  transpose_keys(v, vs, 0, Tk, D, Tk, vt);
  for (int i = 0; i < Tq; ++i) {
    vec s = V::zero();
    for (int d = 0; d < D; d += V::L) {
      const int c = std::min(V::L, D - d);
      s = V::fma(V::load_n(g + i * gs + d, c, 0.f), V::load_n(o + i * os + d, c, 0.f), s);
    }
    rowdot[i] = V::reduce_add(s);
    std::fill(dq + i * dqs, dq + i * dqs + D, 0.f);
  }
  const vec sv = V::set1(scale);
  for (int j0 = 0; j0 < Tk; j0 += kBc) {
    const int bc = std::min(kBc, Tk - j0);
    std::fill(dka, dka + bc * D, 0.f);
    std::fill(dva, dva + bc * D, 0.f);
    for (int i0 = a.causal ? j0 / kBr * kBr : 0; i0 < Tq; i0 += kBr) {
      const int br = std::min(kBr, Tq - i0);
      mm(br, bc, D, q + i0 * qs, qs, 1, kt + j0, Tk, p, kBc, false);  // S
      for (int r = 0; r < br; ++r) {
        float* pr = p + r * kBc;
        const int n = visible(a, i0 + r, j0, bc);
        const vec lv = V::set1(lse[i0 + r]);
        for (int j = 0; j < n; j += V::L) {
          const int c = std::min(V::L, n - j);
          V::store_n(pr + j, vexp(V::sub(V::mul(V::load_n(pr + j, c, 0.f), sv), lv)), c);
        }
        for (int j = n; j < bc; ++j) pr[j] = 0.f;
      }
      mm(bc, D, br, p, 1, kBc, g + i0 * gs, gs, dva, D, true);        // dV += P^T dO
      mm(br, bc, D, g + i0 * gs, gs, 1, vt + j0, Tk, ds, kBc, false);  // dP = dO V^T
      for (int r = 0; r < br; ++r) {  // dS = P (dP - rowdot) scale
        const vec rd = V::set1(rowdot[i0 + r]);
        for (int j = 0; j < bc; j += V::L) {
          const int c = std::min(V::L, bc - j);
          const vec pv = V::load_n(p + r * kBc + j, c, 0.f);
          V::store_n(ds + r * kBc + j, V::mul(V::mul(pv, V::sub(V::load_n(ds + r * kBc + j, c, 0.f), rd)), sv), c);
        }
      }
      mm(br, D, bc, ds, kBc, 1, k + j0 * ks, ks, dq + i0 * dqs, dqs, true);  // dQ += dS K
      mm(bc, D, br, ds, 1, kBc, q + i0 * qs, qs, dka, D, true);              // dK += dS^T Q
    }
    for (int j = 0; j < bc; ++j) {
      std::copy(dka + j * D, dka + j * D + D, dk + (j0 + j) * dks);
      std::copy(dva + j * D, dva + j * D + D, dv + (j0 + j) * dvs);
    }
  }
}

#endif
