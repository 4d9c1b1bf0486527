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

// The FMA part alone, shorter: `threads` threads (<= 0: one per online CPU) each run `reps` x 0.4
// MFLOP-vectors of independent FMA chains (reps 1000 ~ 0.1 s a thread at AVX-512), best of three
// tries. The timing engine probes it between rounds (reps 100) so % of peak compares a case with
// the ceiling the machine offered while it ran, not at the start of the run (a shared machine's
// other processes come and go).
double fma_peak_gflops(int threads, long reps);

}  // namespace dlb::cpu
