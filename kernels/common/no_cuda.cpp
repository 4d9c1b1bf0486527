// CPU-only build: the CUDA facts say why there is no GPU backend.
#include "kernels/common/device.h"
#include "kernels/common/gpu_probe.h"
#include "kernels/common/nvtx.h"

namespace dlb {

const CudaInfo& cuda_info() {
  static const CudaInfo info = [] {
    CudaInfo i;
    i.reason = "dlbench was built without CUDA (nvcc was not found at configure time)";
    return i;
  }();
  return info;
}

GpuMeasuredPeaks measure_gpu_peaks(int) { return {}; }

void nvtx_push(const std::string&) {}
void nvtx_pop() {}

}  // namespace dlb
