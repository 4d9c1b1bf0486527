// Conv2d on the GPU: cuDNN with a per-shape algorithm search (what cudnn.benchmark does: try the
// algorithms once, keep the fastest, cache it by shape and dtype, record which), and our own kernel.
// Same shapes and layouts as kernels/cpu/conv2d.h; device pointers; work is enqueued on `stream`.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/verify.h"  // DType
#include "kernels/cpu/conv2d/conv2d.h"

namespace dlb::cuda {

enum class ConvDir { forward, backward_data, backward_filter };

// dtype: fp32 (tensor cores off), tf32 (fp32 tensors, TF32 math), fp16 / bf16 (tensors in the half
// type, fp32 accumulation). Pointers are float* for fp32/tf32 and __half* / __nv_bfloat16* otherwise.
class CudnnConv2d {
 public:
  CudnnConv2d(const Conv2dShape& shape, DType dtype = DType::fp32);
  ~CudnnConv2d();
  CudnnConv2d(const CudnnConv2d&) = delete;
  CudnnConv2d& operator=(const CudnnConv2d&) = delete;

  // y = conv(x, w) (+ bias[k] when non-null; bias has the tensors' dtype)
  void forward(const void* x, const void* w, const void* bias, void* y, cudaStream_t stream = nullptr);
  // dx = conv^T(dy, w)    (overwrites dx)
  void backward_data(const void* dy, const void* w, void* dx, cudaStream_t stream = nullptr);
  // dw = x (*) dy, db = sum(dy) when db non-null   (overwrite)
  void backward_filter(const void* x, const void* dy, void* dw, void* db, cudaStream_t stream = nullptr);

  // The algorithm the search chose for a direction, e.g. "IMPLICIT_PRECOMP_GEMM".
  std::string algo_name(ConvDir dir) const;
  // The verification tolerance (norm-relative, kernels/common/verify.h) of that direction's result:
  // the dtype's, except fp32 through a transform algorithm (FFT, Winograd; the search may keep one,
  // as PyTorch's cudnn.benchmark may), which rounds in the transformed domain: errors up to ~1e-4
  // of the output's scale instead of the direct sum's ~1e-6. 2e-4 admits that and still fails TF32
  // math (~1e-3) used by mistake.
  double tolerance(ConvDir dir) const;
  // The direction's own workspace (nullptr before its first call or when it needs none): allocated
  // at the direction's first call, never moved after (CUDA graphs captured from it stay valid).
  const void* workspace(ConvDir dir) const;

 private:
  struct Impl;
  Impl* impl_;
};

// Our own kernels (fp32): implicit GEMM, no im2col buffer. Overwrite their outputs.
void conv2d_forward_implicit_gemm(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                                  cudaStream_t stream = nullptr);

}  // namespace dlb::cuda
