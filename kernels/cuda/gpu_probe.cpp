// Measured GPU ceilings (see kernels/common/gpu_probe.h): cuBLAS SGEMM (pedantic fp32, no TF32)
// and fp16 tensor-core GEMM at n = 4096, best of 5 after a warm-up. 2 n^3 flops per GEMM.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "kernels/common/gpu_probe.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"

namespace dlb {

GpuMeasuredPeaks measure_gpu_peaks(int device) {
  DLB_CUDA_CHECK(cudaSetDevice(device));
  const int n = 4096;
  const double flops = 2.0 * n * n * n;
  // Our events are on the default stream, so the GEMMs must be too.
  cublasHandle_t h = cuda::cublas_handle_on(nullptr);
  struct DefaultMathOnExit {
    cublasHandle_t h;
    ~DefaultMathOnExit() { cublasSetMathMode(h, CUBLAS_DEFAULT_MATH); }  // also when a GEMM throws
  } restore{h};
  GpuMeasuredPeaks out;
  cuda::EventTimer t;
  auto best_of = [&](auto&& gemm) {
    gemm();  // warm-up: kernel selection, clocks
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      t.start();
      gemm();
      best = std::min(best, t.stop_seconds());
    }
    return flops / best * 1e-9;
  };
  {
    cuda::DeviceBuffer<float> a(std::size_t(n) * n), b(std::size_t(n) * n), c(std::size_t(n) * n);
    DLB_CUDA_CHECK(cudaMemset(a.data(), 0, a.bytes()));
    DLB_CUDA_CHECK(cudaMemset(b.data(), 0, b.bytes()));
    const float one = 1.f, zero = 0.f;
    DLB_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    out.cublas_sgemm_gflops = best_of([&] {
      DLB_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n, &zero,
                                   c.data(), n));
    });
    DLB_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  }
  {
    cuda::DeviceBuffer<__half> a(std::size_t(n) * n), b(std::size_t(n) * n);
    cuda::DeviceBuffer<float> c(std::size_t(n) * n);
    DLB_CUDA_CHECK(cudaMemset(a.data(), 0, a.bytes()));
    DLB_CUDA_CHECK(cudaMemset(b.data(), 0, b.bytes()));
    const float one = 1.f, zero = 0.f;
    out.cublas_hgemm_tc_gflops = best_of([&] {
      DLB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16F, n, b.data(),
                                    CUDA_R_16F, n, &zero, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    });
  }
  return out;
}

}  // namespace dlb
