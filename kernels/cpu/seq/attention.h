// Scaled dot-product attention, fp32, forward and backward (F.scaled_dot_product_attention /
// nn.MultiheadAttention's core after the projections): O = softmax(scale Q K^T [+ causal mask]) V
// per batch b and head h, Q [Tq, D], K and V [Tk, D]. Causal is torch's is_causal (key j visible to
// query i iff j <= i, top-left aligned when Tq != Tk). Two algorithms, one table (attention_algos):
//   unfused  batched OpenBLAS GEMMs + our row softmax, the probabilities P [B, H, Tq, Tk] kept for
//            backward; attention dropout (nn.Transformer's, on P, Philox as dropout.h with the
//            element index into P) only here
//   flash    ours fused: tiled over query and key blocks with an online softmax (FlashAttention-2's
//            order), P never written; backward recomputes it from the row log-sum-exp
// Tensors are strided views with d contiguous, so [B, H, T, D] and a projection's [B, T, H*D] (or a
// packed [B, T, 3C] QKV) are read in place.
// Napkin math: forward 4 B H Tq Tk D flops (half with causal), backward 2x (unfused: 4 GEMMs) or
// 2.5x (flash: S is recomputed). Bytes: flash moves Q, K, V, O (+ dO, dQ, dK, dV) once per query
// block pass; unfused also writes and reads P, 4 B H Tq Tk bytes a pass (several passes).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::cpu::seq {

// Element (b, h, t, d) at p[b sb + h sh + t st + d].
template <class T>
struct HeadsView {
  T* p = nullptr;
  long sb = 0, sh = 0, st = 0;
  T* at(int b, int h) const { return p + b * sb + h * sh; }
};
// [B, H, T, D] contiguous; and [B, T, row] with head h at columns [h D, (h+1) D) (row = H D, or 3 H D
// for a packed QKV with p pointing at its Q, K or V third).
template <class T>
HeadsView<T> bhtd(T* p, int H, int T_, int D) {
  return {p, long(H) * T_ * D, long(T_) * D, D};
}
template <class T>
HeadsView<T> bthd(T* p, int H, int T_, int D, long row = 0) {
  if (!row) row = long(H) * D;
  return {p, T_ * row, D, row};
}

struct Attn {
  int B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  bool causal = false;
  float scale = 0;  // 0: 1 / sqrt(D)
  float dropout = 0;  // on P (unfused only); seed and offset as dropout.h
  std::uint64_t seed = 0, offset = 0;
  float sc() const { return scale > 0 ? scale : 1.f / std::sqrt(float(D)); }
  void check() const;  // throws std::invalid_argument for non-positive sizes or a dropout outside [0, 1)
  double flops_forward() const;  // 4 B H D * (visible (i, j) pairs)
};

// What forward keeps for backward: P (unfused) or the rows' log-sum-exp [B, H, Tq] (flash).
struct AttnSaved {
  std::vector<float> probs, lse;
};

using CView = HeadsView<const float>;
using MView = HeadsView<float>;

void attention_forward_unfused(const Attn& a, CView q, CView k, CView v, MView o, AttnSaved& s);
void attention_backward_unfused(const Attn& a, CView q, CView k, CView v, CView o, CView dout, const AttnSaved& s,
                                MView dq, MView dk, MView dv);
void attention_forward_flash(const Attn& a, CView q, CView k, CView v, MView o, AttnSaved& s);
void attention_backward_flash(const Attn& a, CView q, CView k, CView v, CView o, CView dout, const AttnSaved& s,
                              MView dq, MView dk, MView dv);

// The algorithms, for callers that pick one by name (records' `attn`) and for the tests.
struct AttnAlgo {
  const char* name;
  void (*forward)(const Attn&, CView, CView, CView, MView, AttnSaved&);
  void (*backward)(const Attn&, CView, CView, CView, CView, CView, const AttnSaved&, MView, MView, MView);
  bool dropout;  // supports Attn::dropout > 0
};
const std::vector<AttnAlgo>& attention_algos();
const AttnAlgo& attention_algo(const std::string& name);  // throws std::invalid_argument

// fp64 reference (dropout as the unfused path draws it); dq, dk, dv overwritten.
void attention_forward_ref(const Attn& a, HeadsView<const double> q, HeadsView<const double> k,
                           HeadsView<const double> v, HeadsView<double> o);
void attention_backward_ref(const Attn& a, HeadsView<const double> q, HeadsView<const double> k,
                            HeadsView<const double> v, HeadsView<const double> dout, HeadsView<double> dq,
                            HeadsView<double> dk, HeadsView<double> dv);

}  // namespace dlb::cpu::seq
