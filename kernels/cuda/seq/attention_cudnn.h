// cuDNN's fused attention (the graph API's SDPA node, through NVIDIA's header-only cudnn-frontend):
// the library path the issue holds our flash_tc against, recorded as impl/attn=cudnn. Same contract
// as the fused rows of attention.h (Attn, strided views over device memory, lse [B, H, Tq] fp32 kept
// for backward), so callers swap it in by row. Storage fp16 or bf16 (cuDNN's SDPA takes no fp32
// I/O: fp32 throws Unsupported), fp32 softmax and accumulation; causal is top-left aligned (Tq == Tk
// in our callers); no dropout. One graph per shape, strides and dtype, built on first use and cached
// per host thread with its workspace. Built without the frontend's headers every call throws
// Unsupported with that reason (CMake: DLB_CUDNN_FRONTEND_INCLUDE).
// Ran on an H100 (2026-11-27): test_attention_cudnn_gpu and the attention suite's rows verified.
#pragma once
#include <string>
#include <vector>

#include "kernels/cuda/seq/attention.h"

namespace dlb::cuda::seq {

// "" when this build has the frontend, else why not (the Unsupported reason).
std::string cudnn_attention_unavailable();

// scratch is unused (cuDNN's workspace is cached here); t = fp16 or bf16.
void attention_forward_cudnn(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                             cudaStream_t s);
void attention_backward_cudnn(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout,
                              const float* lse, AnyMView dq, AnyMView dk, AnyMView dv, float* scratch, DType t,
                              cudaStream_t s);

// The rows (name "cudnn"; bf16, fp16) in flash_kernels()' shape, for the suite and the tests.
const std::vector<FlashKernel>& cudnn_attention_kernels();

}  // namespace dlb::cuda::seq
