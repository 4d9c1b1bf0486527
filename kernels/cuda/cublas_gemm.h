// cuBLAS GEMMs: the matmul suite's C (fp32) = A B, and gemm_f32, the autocast table of the GEMMs
// on fp32 buffers (the sequence trainer's twins, our recurrent layers). Row-major, device pointers.
//   fp32  cublasGemmEx, CUBLAS_COMPUTE_32F with the default math mode: no TF32 (true fp32 FMAs)
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32: fp32 in/out, tensor cores on inputs rounded to TF32
//   fp16  A, B in fp16, fp32 accumulate and output (tensor cores)
//   bf16  A, B in bf16, fp32 accumulate and output (tensor cores)
// (NVIDIA_TF32_OVERRIDE=1 in the environment would change "fp32"; the fingerprint records env.)
#pragma once
#include <cuda_runtime.h>

#include "kernels/common/verify.h"

namespace dlb::cuda {

enum class CublasGemmMode { fp32, tf32, fp16, bf16 };

// a, b: float* for fp32/tf32, 16-bit values for fp16/bf16. Runs on the shared handle's stream
// (set to `stream` for the call).
void cublas_gemm(CublasGemmMode mode, const void* a, const void* b, float* c, int m, int n, int k,
                 cudaStream_t stream = nullptr);

// Autocast of a GEMM whose A, B and C stay fp32 buffers: the one table from a training dtype to the
// cuBLAS compute type (cublasGemmEx takes CUDA_R_32F A, B, C with each of these):
//   fp32  CUBLAS_COMPUTE_32F            plain fp32 FMAs (no TF32)
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32  operands rounded to TF32 (10-bit mantissa), tensor cores
//   bf16  CUBLAS_COMPUTE_32F_FAST_16BF  operands rounded to bf16 (7-bit mantissa), tensor cores
//   fp16  CUBLAS_COMPUTE_32F_FAST_16F   operands rounded to fp16 (the caller scales the loss: its
//                                       gradients would flush below 2^-24; gpu_seq_trainer.cu)
// Accumulation and C are fp32 in every case; memory does not shrink as under PyTorch's autocast.
const char* gemm_f32_compute_name(DType t);  // "CUBLAS_COMPUTE_32F_FAST_16BF", ...; throws for fp64
// Row-major C[m, n] = alpha op(A) op(B) + beta C on fp32 buffers, computed per `t` (the table above).
void gemm_f32(cudaStream_t s, DType t, bool ta, bool tb, long m, long n, long k, float alpha, const float* a, long lda,
              const float* b, long ldb, float beta, float* c, long ldc);

}  // namespace dlb::cuda
