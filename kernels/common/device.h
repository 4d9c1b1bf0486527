// What the CUDA side of this machine is: driver/runtime/library versions and every GPU.
// Implemented in kernels/cuda/device_info.cpp, or by kernels/common/no_cuda.cpp in a CPU-only build.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dlb {

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  double sm_clock_mhz = 0;      // max SM clock
  double mem_clock_mhz = 0;     // max memory clock
  int mem_bus_width_bits = 0;
  std::size_t mem_total_bytes = 0;
  bool ecc = false;
  // Peaks from the device properties (napkin: SMs x FP32 lanes/SM x 2 flop/FMA x clock;
  // DRAM: 2 transfers/clock x bus width / 8 x memory clock).
  double peak_fp32_gflops = 0;
  double peak_mem_gb_per_s = 0;
};

struct CudaInfo {
  bool built_with_cuda = false;
  bool available = false;  // at least one usable device
  std::string reason;      // why not available (the driver's own words where it gave any)
  int driver_version = 0;  // e.g. 13000
  int runtime_version = 0;
  int cublas_version = 0;  // the loaded library where a device exists, else the headers we built with
  int cudnn_version = 0;
  std::vector<GpuInfo> gpus;
};

// Never throws; cached after the first call.
const CudaInfo& cuda_info();

// "13.0" from 13000
std::string cuda_version_string(int v);

}  // namespace dlb
