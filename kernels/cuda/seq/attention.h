// Attention on the GPU, the twin of kernels/cpu/seq/attention.h (same Attn, same strided views, here
// over device memory), checked against its fp64 reference:
//   unfused  cuBLAS strided-batched GEMMs (min(B, H) batches of the larger; causal: query blocks against
//            the keys they see) + our row softmax, P kept; Philox dropout on P as the CPU draws it; fp32
//   flash    ours fused: one warp per query (or key) row, key (or query) tiles of 32 in shared memory,
//            online softmax forward; backward as two kernels (dQ per query row, dK/dV per key row,
//            each recomputing P from the row log-sum-exp: deterministic, no atomics); fp32 or bf16
//            storage (DType::bf16, views of bf16 bits) with fp32 arithmetic; head dim <= 128
//   flash_tc ours fused on the tensor cores (flash_tc.cu): bf16 mma.sync, FlashAttention-2's tiling,
//            head dims 64 and 128, bf16 storage; backward deterministic as flash's
// Napkin math: as the CPU's (4 B H Tq Tk D forward flops, half causal). flash runs on the FP32 pipes
// (no tensor-core MMA): a fraction of cuDNN's / FlashAttention-2's tensor-core rate; flash_tc is the
// one to hold against cuDNN.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/common/verify.h"  // DType
#include "kernels/cpu/seq/attention.h"

namespace dlb::cuda::seq {

using cpu::seq::Attn;
using CView = cpu::seq::HeadsView<const float>;
using MView = cpu::seq::HeadsView<float>;

// probs: B H Tq Tk device floats (kept for backward; twice that with dropout: P, then P after
// dropout); backward's scratch: B H Tq Tk floats. offset_add: the dropout's, as dropout_forward's.
void attention_forward_unfused(const Attn& a, CView q, CView k, CView v, MView o, float* probs, cudaStream_t s,
                               const std::uint64_t* offset_add = nullptr);
void attention_backward_unfused(const Attn& a, CView q, CView k, CView v, CView dout, const float* probs, MView dq,
                                MView dk, MView dv, float* scratch, cudaStream_t s,
                                const std::uint64_t* offset_add = nullptr);

// Views of fp32 elements (t = fp32) or bf16 bits (t = bf16), as void* with element strides.
struct AnyView {
  const void* p = nullptr;
  long sb = 0, sh = 0, st = 0;
};
struct AnyMView {
  void* p = nullptr;
  long sb = 0, sh = 0, st = 0;
};
// lse: B H Tq floats (kept for backward); backward's scratch: B H Tq floats.
void attention_forward_flash(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                             cudaStream_t s);
void attention_backward_flash(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout, const float* lse,
                              AnyMView dq, AnyMView dk, AnyMView dv, float* scratch, DType t, cudaStream_t s);
// The same contract on the tensor cores (t = bf16; head dim 64 or 128; rows 16-byte aligned, else
// Unsupported).
void attention_forward_flash_tc(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                                cudaStream_t s);
void attention_backward_flash_tc(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout,
                                 const float* lse, AnyMView dq, AnyMView dk, AnyMView dv, float* scratch, DType t,
                                 cudaStream_t s);
// flash_tc's forward with the next K/V tile's copy (cp.async) overlapping this tile's math and K's
// fragments by ldmatrix; the same contract, results and backward (an ablation row, flash_tc.cu).
void attention_forward_flash_tc_pipe(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                                     cudaStream_t s);

// The fused kernels, a row per kernel and storage dtype: tests/test_seq_gpu.cu and the attention
// suite iterate it, so a new row is tested and timed without another edit.
struct FlashKernel {
  const char* name;  // the records' `attn`
  DType storage;
  bool tensor_cores;
  int max_head_dim;  // and head_dim % 64 == 0 for the tensor-core rows
  void (*forward)(const Attn&, AnyView, AnyView, AnyView, AnyMView, float*, DType, cudaStream_t);
  void (*backward)(const Attn&, AnyView, AnyView, AnyView, AnyView, AnyView, const float*, AnyMView, AnyMView,
                   AnyMView, float*, DType, cudaStream_t);
  bool takes(int head_dim) const { return head_dim <= max_head_dim && (!tensor_cores || head_dim % 64 == 0); }
};
const std::vector<FlashKernel>& flash_kernels();

}  // namespace dlb::cuda::seq
