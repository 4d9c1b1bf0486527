// cuBLAS GEMMs for the matmul suite: C (fp32) = A B, row-major, device pointers.
//   fp32  cublasGemmEx, CUBLAS_COMPUTE_32F with the default math mode: no TF32 (true fp32 FMAs)
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32: fp32 in/out, tensor cores on inputs rounded to TF32
//   fp16  A, B in fp16, fp32 accumulate and output (tensor cores)
//   bf16  A, B in bf16, fp32 accumulate and output (tensor cores)
// (NVIDIA_TF32_OVERRIDE=1 in the environment would change "fp32"; the fingerprint records env.)
#pragma once
#include <cuda_runtime.h>

namespace dlb::cuda {

enum class CublasGemmMode { fp32, tf32, fp16, bf16 };

// a, b: float* for fp32/tf32, 16-bit values for fp16/bf16. Runs on the shared handle's stream
// (set to `stream` for the call).
void cublas_gemm(CublasGemmMode mode, const void* a, const void* b, float* c, int m, int n, int k,
                 cudaStream_t stream = nullptr);

}  // namespace dlb::cuda
