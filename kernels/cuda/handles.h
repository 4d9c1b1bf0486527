// Library handles shared by every GPU user (one per device and host thread, created on first use;
// each call site binds the stream it works on) and their error checks, which throw.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

namespace dlb::cuda {

// The current device's cuBLAS handle bound to `stream` with the default math mode (no TF32 for
// fp32; tensor cores for half inputs). The handle is shared and keeps whatever its last user set (a
// stream that may be destroyed by now, PEDANTIC math): every cuBLAS call site takes it through here.
cublasHandle_t cublas_handle_on(cudaStream_t stream);
cublasLtHandle_t cublaslt_handle();
cudnnHandle_t cudnn_handle_on(cudaStream_t stream);  // the same for cuDNN (stream only)

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
