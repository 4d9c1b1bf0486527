// Measured GPU ceilings for the run's context: what cuBLAS actually reaches on a large square GEMM,
// beside the theoretical peaks from the device properties (kernels/common/device.h).
#pragma once

namespace dlb {

struct GpuMeasuredPeaks {
  double cublas_sgemm_gflops = 0;       // fp32, tensor cores off, n = 4096
  double cublas_hgemm_tc_gflops = 0;    // fp16 in, fp32 accumulate, tensor cores, n = 4096
};
// What the probe multiplies (recorded beside its figures).
inline constexpr const char* kGpuProbeData = "uniform random in [-1, 1], n = 4096";

// Throws (std::runtime_error / OutOfMemory) if the device can't run it; no-CUDA builds return zeros.
GpuMeasuredPeaks measure_gpu_peaks(int device);

}  // namespace dlb
