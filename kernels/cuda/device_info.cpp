// CUDA facts for the fingerprint: driver/runtime, cuBLAS/cuDNN versions, every GPU with its peaks.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/common/device.h"
#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"

namespace dlb {

namespace {
// FP32 lanes per SM by architecture (CUDA programming guide, arithmetic instructions table).
int fp32_lanes_per_sm(int major, int minor) {
  if (major == 8 && minor == 0) return 64;  // A100
  if (major >= 8) return 128;               // GA10x, Ada, Hopper, Blackwell
  if (major == 7) return 64;
  if (major == 6 && minor == 0) return 64;
  return 128;
}

int attr(cudaDeviceAttr a, int dev) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}
}  // namespace

const CudaInfo& cuda_info() {
  static const CudaInfo info = [] {
    CudaInfo i;
    i.built_with_cuda = true;
    cudaDriverGetVersion(&i.driver_version);
    cudaRuntimeGetVersion(&i.runtime_version);
    // Without a device: the versions we compiled against (header macros); asking the libraries would
    // load them (cuBLAS + cuBLASLt + cuDNN: ~700 MiB of address space) for nothing (issue 13).
    i.cublas_version = CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
    i.cudnn_version = CUDNN_VERSION;
    std::string why;
    if (!cuda::device_available(&why)) {
      i.reason = "no CUDA device (" + why + ")";
      return i;
    }
    try {  // with a device: the versions actually loaded (lazy_libs.h)
      int maj = 0, min = 0, pat = 0;
      if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
          cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
          cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
        i.cublas_version = maj * 10000 + min * 100 + pat;
      i.cudnn_version = static_cast<int>(cudnnGetVersion());
    } catch (const Unsupported&) {  // a library that cannot be loaded: its cases will say so
    }
    int n = 0;
    cudaGetDeviceCount(&n);
    for (int d = 0; d < n; ++d) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      GpuInfo g;
      g.index = d;
      g.name = p.name;
      char bus[32] = {0};
      if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) == cudaSuccess) g.pci_bus_id = bus;
      g.cc_major = p.major;
      g.cc_minor = p.minor;
      g.sms = p.multiProcessorCount;
      g.sm_clock_mhz = attr(cudaDevAttrClockRate, d) / 1000.0;           // kHz -> MHz
      g.mem_clock_mhz = attr(cudaDevAttrMemoryClockRate, d) / 1000.0;    // kHz -> MHz
      g.mem_bus_width_bits = attr(cudaDevAttrGlobalMemoryBusWidth, d);
      g.mem_total_bytes = p.totalGlobalMem;
      g.ecc = attr(cudaDevAttrEccEnabled, d) != 0;
      g.peak_fp32_gflops = g.sms * fp32_lanes_per_sm(p.major, p.minor) * 2.0 * g.sm_clock_mhz * 1e-3;
      g.peak_mem_gb_per_s = 2.0 * g.mem_clock_mhz * 1e6 * (g.mem_bus_width_bits / 8.0) * 1e-9;
      i.gpus.push_back(g);
    }
    i.available = !i.gpus.empty();
    if (!i.available) i.reason = "no CUDA device (no device properties could be read)";
    return i;
  }();
  return info;
}

}  // namespace dlb
