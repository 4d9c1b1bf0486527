// Measured GPU ceilings (see kernels/common/gpu_probe.h): cuBLAS SGEMM (pedantic fp32, no TF32)
// and fp16 tensor-core GEMM at n = 4096, best of 5 after a warm-up. 2 n^3 flops per GEMM. The
// matrices hold uniform random values in [-1, 1]: a product of zeros toggles fewer bits and draws
// less power, so it runs faster than real data (13% for bf16 on an H200).
// No GPU has run this yet.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "kernels/common/gpu_probe.h"
#include "kernels/common/verify.h"
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
  // Best of 5 event pairs, each around `calls` back-to-back GEMMs (>= ~2 ms), so the host's dispatch
  // of a call is not inside the time of a 0.2 ms product.
  auto best_of = [&](auto&& gemm) {
    gemm();  // warm-up: kernel selection, clocks
    t.start();
    gemm();
    const double one = t.stop_seconds();
    const int calls = std::clamp(static_cast<int>(2e-3 / std::max(one, 1e-6)) + 1, 1, 50);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      t.start();
      for (int j = 0; j < calls; ++j) gemm();
      best = std::min(best, t.stop_seconds() / calls);
    }
    return flops / best * 1e-9;
  };
  const std::size_t nn = std::size_t(n) * n;
  std::vector<float> ha(nn), hb(nn);
  fill_uniform(ha.data(), nn, 41);
  fill_uniform(hb.data(), nn, 42);
  {
    cuda::DeviceBuffer<float> a(nn), b(nn), c(nn);
    a.upload(ha.data(), nn);
    b.upload(hb.data(), nn);
    const float one = 1.f, zero = 0.f;
    DLB_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    out.cublas_sgemm_gflops = best_of([&] {
      DLB_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n, &zero,
                                   c.data(), n));
    });
    DLB_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  }
  {
    std::vector<__half> a16(nn), b16(nn);
    for (std::size_t i = 0; i < nn; ++i) a16[i] = __float2half(ha[i]), b16[i] = __float2half(hb[i]);
    cuda::DeviceBuffer<__half> a(nn), b(nn);
    cuda::DeviceBuffer<float> c(nn);
    a.upload(a16.data(), nn);
    b.upload(b16.data(), nn);
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
