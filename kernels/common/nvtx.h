// NVTX ranges (nvtx3, header-only, from the CUDA toolkit) so nsys and ncu show dlbench's names: the
// run loop puts one around every case, the GPU profiler one around every region. No-ops in a
// CPU-only build (kernels/common/no_cuda.cpp).
#pragma once
#include <string>

namespace dlb {

void nvtx_push(const std::string& name);
void nvtx_pop();

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtx_push(name); }
  ~NvtxRange() { nvtx_pop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace dlb
