// CPU matrix products C = A B (row-major, A m x k, B k x n, C m x n), fp32.
// The plain fp64 reference lives in gemm_ref.h; here are the fast versions:
//   sgemm_forward_openblas  OpenBLAS cblas_sgemm (multi-threaded; its kernel set: openblas_core.h)
//   sgemm_forward_blocked   our own cache-blocked, auto-vectorised kernel (single thread): a
//                           yardstick for what a library adds over the textbook loop order.
// OpenBLAS sbgemm (bf16) is not offered: see cpu_bf16_gemm_unsupported_reason().
#pragma once
#include <cstdint>
#include <string>

namespace dlb::cpu {

void sgemm_forward_openblas(const float* a, const float* b, float* c, long m, long n, long k);
void sgemm_forward_blocked(const float* a, const float* b, float* c, long m, long n, long k);

// Under an address-space limit (ulimit -v), OpenBLAS retries a failed allocation of its per-thread
// work buffers (128 MiB each) forever, so a GEMM called near the limit never returns. This takes those
// buffers once, up front, while there is room: with no limit it does nothing; else a trial mmap checks
// that they fit, then one threaded sgemm (and with `pool`, one single-threaded sgemm on each thread of
// the kernels' pool, threads.h, as the training and conv kernels call it) makes OpenBLAS take and keep
// them. Returns "" or why they do not fit (the caller refuses to start, rather than hang later).
std::string openblas_reserve_buffers(bool pool);

// bf16 inputs (raw bits), fp32 accumulate and output, through OpenBLAS cblas_sbgemm looked up at
// run time. Throws dlb::Unsupported where the library lacks it (check the reason below first).
void sbgemm_forward_openblas(const std::uint16_t* a, const std::uint16_t* b, float* c, long m, long n, long k);

// Why a bf16 GEMM cannot run on this CPU/OpenBLAS ("" if it could): needs avx512_bf16 and an
// OpenBLAS built with BUILD_BFLOAT16 (exporting cblas_sbgemm).
std::string cpu_bf16_gemm_unsupported_reason();
bool openblas_has_sbgemm();  // the loaded OpenBLAS exports cblas_sbgemm

}  // namespace dlb::cpu
