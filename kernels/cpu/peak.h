// Microkernels that measure this CPU's ceilings once per run: FP32 FMA peak on all cores (AVX2 or
// AVX-512, whichever the CPU has) and host memory bandwidth (a streaming scale b = s*a).
#pragma once
#include <string>

namespace dlb::cpu {

struct CpuPeaks {
  double fp32_gflops = 0;      // all cores, FMA = 2 flops
  double mem_gb_per_s = 0;     // bytes read + written per second, all cores
  std::string fma_isa;         // "avx512f", "avx2+fma" or "scalar"
  int threads = 0;
};

// Takes about half a second. `threads` <= 0: one per online CPU.
CpuPeaks measure_peaks(int threads = 0);

}  // namespace dlb::cpu
