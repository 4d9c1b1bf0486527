// Library handles shared by every GPU user (one per device and host thread, created on first use,
// bound to the default stream unless the caller sets another) and their error checks, which throw.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

namespace dlb::cuda {

cublasHandle_t cublas_handle();      // for the current device
cublasLtHandle_t cublaslt_handle();
cudnnHandle_t cudnn_handle();

[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t s, const char* expr, const char* file, int line);

#define DLB_CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                         \
    cublasStatus_t dlb_st_ = (expr);                                                           \
    if (dlb_st_ != CUBLAS_STATUS_SUCCESS) ::dlb::cuda::throw_cublas_error(dlb_st_, #expr, __FILE__, __LINE__); \
  } while (0)

#define DLB_CUDNN_CHECK(expr)                                                                  \
  do {                                                                                         \
    cudnnStatus_t dlb_st_ = (expr);                                                            \
    if (dlb_st_ != CUDNN_STATUS_SUCCESS) ::dlb::cuda::throw_cudnn_error(dlb_st_, #expr, __FILE__, __LINE__); \
  } while (0)

}  // namespace dlb::cuda
