// Peak probes (see peak.h): the FMA chains, one body over the vector width (kernels/cpu/simd.h,
// compiled once per ISA by kernels/cpu/foreach_isa.h), and the dispatch. Each thread runs
// independent FMA chains long enough to hide the FMA latency (12 accumulators > latency 4 x 2
// pipes), so the figure is throughput-bound.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu {
namespace {
constexpr long kInner = 1 << 14;  // FMAs per chain per rep
}  // namespace
}  // namespace dlb::cpu

#define DLB_ISA_NAMESPACE dlb::cpu
#define DLB_ISA_INCLUDE "kernels/cpu/peak.cpp"
#include "kernels/cpu/foreach_isa.h"

namespace dlb::cpu {

namespace {
using Clock = std::chrono::steady_clock;

template <class F>
double parallel_best_rate(int threads, F&& body_rate) {
  // Three rounds; in each, all threads run together and the summed rate is kept. Best round wins.
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> rate(threads, 0.0);
    std::vector<std::thread> ts;
    try {
      for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { rate[t] = body_rate(t); });
    } catch (...) {  // no memory for another thread's stack: join the ones started, then report it
      for (auto& th : ts) th.join();
      throw;
    }
    for (auto& th : ts) th.join();
    double sum = 0;
    for (double r : rate) sum += r;
    best = std::max(best, sum);
  }
  return best;
}

// The chains at the ISA level in force (the CPU under the DLB_CPU_ISA cap, isa.h).
float (*fma_loop(int* lanes, std::string* isa))(long) {
  *lanes = isa_allows(Isa::avx512) ? 16 : isa_allows(Isa::avx2) ? 8 : 1;
  *isa = *lanes == 16 ? "avx512f" : *lanes == 8 ? "avx2+fma" : "scalar";
  return DLB_ISA_PICK(fma_chains);
}

int thread_count(int threads) { return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
}  // namespace

double fma_peak_gflops(int threads, long reps) {
  int lanes = 1;
  std::string isa;
  float (*loop)(long) = fma_loop(&lanes, &isa);
  std::atomic<float> sink{0};
  const double g = parallel_best_rate(thread_count(threads), [&](int) {
    const auto t0 = Clock::now();
    sink = sink + loop(reps);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return 12.0 * lanes * 2.0 * kInner * reps / s * 1e-9;
  });
  if (sink.load() == 12345.f) std::abort();  // keep the FMA chains alive
  return g;
}

CpuPeaks measure_peaks(int threads) {
  CpuPeaks p;
  p.threads = thread_count(threads);
  int lanes = 1;
  fma_loop(&lanes, &p.fma_isa);
  p.fp32_gflops = fma_peak_gflops(p.threads, 1000);  // ~3e9 flops per call with AVX2: tens of ms

  // Memory: each thread scales its own 32 MiB slice (well past L3 in total), read + write bytes.
  const std::size_t n = (32u << 20) / sizeof(float);
  std::vector<std::vector<float>> src(p.threads, std::vector<float>(n, 1.0f)), dst(p.threads, std::vector<float>(n));
  p.mem_gb_per_s = parallel_best_rate(p.threads, [&](int t) {
    const float* a = src[t].data();
    float* b = dst[t].data();
    const auto t0 = Clock::now();
    for (int r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < n; ++i) b[i] = 1.0001f * a[i];
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return 2.0 * 2.0 * n * sizeof(float) / s * 1e-9;
  });
  return p;
}

}  // namespace dlb::cpu

#else  // ---- the FMA chains, once per ISA (foreach_isa.h) ----

using vec = V::vec;

// 12 chains x V::L lanes x 2 flop x kInner per rep. Named accumulators are what GCC keeps in
// registers (forward_direct_block's note); the chains never meet until the end.
float fma_chains(long reps) {
  vec a0 = V::set1(0.f), a1 = V::set1(0.001f), a2 = V::set1(0.002f), a3 = V::set1(0.003f);
  vec a4 = V::set1(0.004f), a5 = V::set1(0.005f), a6 = V::set1(0.006f), a7 = V::set1(0.007f);
  vec a8 = V::set1(0.008f), a9 = V::set1(0.009f), a10 = V::set1(0.010f), a11 = V::set1(0.011f);
  const vec m = V::set1(0.999999f), c = V::set1(1e-7f);
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kInner; ++k) {
      a0 = V::fma(a0, m, c), a1 = V::fma(a1, m, c), a2 = V::fma(a2, m, c), a3 = V::fma(a3, m, c);
      a4 = V::fma(a4, m, c), a5 = V::fma(a5, m, c), a6 = V::fma(a6, m, c), a7 = V::fma(a7, m, c);
      a8 = V::fma(a8, m, c), a9 = V::fma(a9, m, c), a10 = V::fma(a10, m, c), a11 = V::fma(a11, m, c);
    }
  const vec s = V::add(V::add(V::add(a0, a1), V::add(a2, a3)), V::add(V::add(a4, a5), V::add(a6, a7)));
  return V::reduce_add(V::add(s, V::add(V::add(a8, a9), V::add(a10, a11))));
}

#endif
