// cuBLAS GEMM calls (see cublas_gemm.h). cuBLAS is column-major: a row-major C = A B is the
// column-major C^T = B^T A^T, so we pass B first and swap m and n; no transposes are needed.
#include "kernels/cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include "kernels/cuda/handles.h"

namespace dlb::cuda {

void cublas_gemm(CublasGemmMode mode, const void* a, const void* b, float* c, int m, int n, int k,
                 cudaStream_t stream) {
  cublasHandle_t h = cublas_handle_on(stream);
  cudaDataType_t in = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (mode) {
    case CublasGemmMode::fp32: break;
    case CublasGemmMode::tf32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case CublasGemmMode::fp16: in = CUDA_R_16F; break;
    case CublasGemmMode::bf16: in = CUDA_R_16BF; break;
  }
  const float alpha = 1.f, beta = 0.f;
  DLB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, in, n, a, in, k, &beta, c, CUDA_R_32F,
                                n, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace dlb::cuda
