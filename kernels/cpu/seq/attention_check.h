// A sampled fp64 check of an attention result (forward O, backward dQ, dK, dV; no dropout), for
// shapes whose full fp64 reference would take minutes (the attention suite's 16k-token cases): on a
// few (b, h) heads, every row's softmax statistics and O in fp64 (Tq Tk D multiply-adds a head), then
// dQ on sampled query rows and dK, dV on sampled key rows, each exact in fp64. Errors are
// max_rel_err's: |got - ref| over the largest |ref| of the sampled part of that tensor.
#pragma once
#include "kernels/cpu/seq/attention.h"

namespace dlb::cpu::seq {

struct AttnCheck {
  double o = 0, dq = 0, dk = 0, dv = 0;  // 0 where not checked
  double worst() const { return std::max(std::max(o, dq), std::max(dk, dv)); }
};

// dout.p null: forward only (dq, dk, dv ignored). `samples` query rows and key rows a head; heads
// spread over [0, B H), as many as keep the fp64 work near 4e9 multiply-adds (at least 1, at most 4).
AttnCheck attention_check_sampled(const Attn& a, CView q, CView k, CView v, CView o, CView dout, CView dq, CView dk,
                                  CView dv, int samples = 16);

}  // namespace dlb::cpu::seq
