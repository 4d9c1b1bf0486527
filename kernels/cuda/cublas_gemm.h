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
// cuBLAS call:
//   fp32  CUBLAS_COMPUTE_32F            plain fp32 FMAs (no TF32)
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32  operands rounded to TF32 (10-bit mantissa), tensor cores
//   bf16  op(A), op(B) cast to bf16 (round to nearest even) into a kept device copy, then
//         cublasGemmEx CUDA_R_16BF x CUDA_R_16BF -> CUDA_R_32F, CUBLAS_COMPUTE_32F
//   fp16  the same with fp16 (past 65504 -> inf: the caller scales the loss, and an overflow shows
//         as inf/NaN gradients; gpu_seq_trainer.cu)
// (cublas_gemm.cpp says why not FAST_16BF / FAST_16F: on an H100 they computed in TF32.)
// Accumulation and C are fp32 in every case; memory does not shrink as under PyTorch's autocast:
// it grows by the two operand copies (the largest GEMM's, per stream, freed with the stream:
// stream_scratch.h).
const char* gemm_f32_compute_name(DType t);  // "CUBLAS_COMPUTE_32F_FAST_TF32", ...; throws for fp64
// Row-major C[m, n] = alpha op(A) op(B) + beta C on fp32 buffers, computed per `t` (the table above).
void gemm_f32(cudaStream_t s, DType t, bool ta, bool tb, long m, long n, long k, float alpha, const float* a, long lda,
              const float* b, long ldb, float beta, float* c, long ldc);

}  // namespace dlb::cuda
