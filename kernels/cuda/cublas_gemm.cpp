// cuBLAS GEMM calls (see cublas_gemm.h). cuBLAS is column-major: a row-major C = A B is the
// column-major C^T = B^T A^T, so we pass B first and swap m and n; no transposes are needed.
#include "kernels/cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "kernels/common/errors.h"
#include "kernels/cuda/amp_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/stream_scratch.h"

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
// fp16 and bf16 round the operands themselves (amp_cast_fp32_to_half_2d) and call the 16-bit GEMM
// (A, B CUDA_R_16F / CUDA_R_16BF, C CUDA_R_32F, CUBLAS_COMPUTE_32F), as autocast's casts do. The
// FAST_16F / FAST_16BF compute types on fp32 operands were used first: on an H100 (cuBLAS 13.1,
// 2026-11-27) they returned the FAST_TF32 result bit for bit (the amp suite's rnn, lstm and
// transformer rows: the same max_rel_err in tf32, bf16 and fp16) and a loss scale of 2^40 never
// overflowed, so they computed in TF32: "allows down-conversion" is not a promise to convert.
struct Autocast {
  DType t;
  cublasComputeType_t compute;
  cudaDataType_t operands;
  const char* name;
};
constexpr Autocast kAutocast[] = {
    {DType::fp32, CUBLAS_COMPUTE_32F, CUDA_R_32F, "CUBLAS_COMPUTE_32F"},
    {DType::tf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, "CUBLAS_COMPUTE_32F_FAST_TF32"},
    {DType::bf16, CUBLAS_COMPUTE_32F, CUDA_R_16BF, "CUBLAS_COMPUTE_32F on CUDA_R_16BF operands"},
    {DType::fp16, CUBLAS_COMPUTE_32F, CUDA_R_16F, "CUBLAS_COMPUTE_32F on CUDA_R_16F operands"},
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
  const Autocast& ac = autocast(t);
  const void* pa = a;
  const void* pb = b;
  if (ac.operands != CUDA_R_32F) {  // op(A) is m x k, stored rows x cols with lda; packed with ld = cols
    const bool bf16 = ac.operands == CUDA_R_16BF;
    const long ar = ta ? k : m, acols = ta ? m : k, br = tb ? n : k, bcols = tb ? k : n;
    // The copies are the stream's scratch (stream_scratch.h): the next call's casts on `s` run after
    // this call's GEMM, so one pair per stream suffices; kept at the largest GEMM's size.
    constexpr const char* kWhy = "gemm_f32: its 16-bit operand space grows (an allocation) inside CUDA graph capture; "
                                 "run the largest GEMM once before capturing";
    auto* ha = static_cast<std::uint16_t*>(
        stream_scratch(s, ScratchSlot::half_a, std::max<std::size_t>(std::size_t(ar) * std::size_t(acols), 1) * 2, kWhy));
    auto* hb = static_cast<std::uint16_t*>(
        stream_scratch(s, ScratchSlot::half_b, std::max<std::size_t>(std::size_t(br) * std::size_t(bcols), 1) * 2, kWhy));
    amp_cast_fp32_to_half_2d(a, lda, ar, acols, ha, bf16, s);
    amp_cast_fp32_to_half_2d(b, ldb, br, bcols, hb, bf16, s);
    pa = ha, pb = hb, lda = acols, ldb = bcols;
  }
  DLB_CUBLAS_CHECK(cublasGemmEx(cublas_handle_on(s), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                int(n), int(m), int(k), &alpha, pb, ac.operands, int(std::max(1L, ldb)), pa, ac.operands,
                                int(std::max(1L, lda)), &beta, c, CUDA_R_32F, int(ldc), ac.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace dlb::cuda
