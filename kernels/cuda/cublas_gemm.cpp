// cuBLAS GEMM calls (see cublas_gemm.h). cuBLAS is column-major: a row-major C = A B is the
// column-major C^T = B^T A^T, so we pass B first and swap m and n; no transposes are needed.
#include "kernels/cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include "kernels/common/errors.h"
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

namespace {
struct Autocast {
  DType t;
  cublasComputeType_t compute;
  const char* name;
};
constexpr Autocast kAutocast[] = {
    {DType::fp32, CUBLAS_COMPUTE_32F, "CUBLAS_COMPUTE_32F"},
    {DType::tf32, CUBLAS_COMPUTE_32F_FAST_TF32, "CUBLAS_COMPUTE_32F_FAST_TF32"},
    {DType::bf16, CUBLAS_COMPUTE_32F_FAST_16BF, "CUBLAS_COMPUTE_32F_FAST_16BF"},
    {DType::fp16, CUBLAS_COMPUTE_32F_FAST_16F, "CUBLAS_COMPUTE_32F_FAST_16F"},
};
const Autocast& autocast(DType t) {
  for (const Autocast& a : kAutocast)
    if (a.t == t) return a;
  throw Unsupported(std::string("no cuBLAS autocast of fp32 GEMMs to ") + dtype_name(t));
}
}  // namespace

const char* gemm_f32_compute_name(DType t) { return autocast(t).name; }

// As cublas_gemm: the row-major product as the column-major C^T = op(B)^T op(A)^T.
void gemm_f32(cudaStream_t s, DType t, bool ta, bool tb, long m, long n, long k, float alpha, const float* a, long lda,
              const float* b, long ldb, float beta, float* c, long ldc) {
  const cublasComputeType_t compute = autocast(t).compute;
  DLB_CUBLAS_CHECK(cublasGemmEx(cublas_handle_on(s), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                int(n), int(m), int(k), &alpha, b, CUDA_R_32F, int(ldb), a, CUDA_R_32F, int(lda), &beta,
                                c, CUDA_R_32F, int(ldc), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace dlb::cuda
