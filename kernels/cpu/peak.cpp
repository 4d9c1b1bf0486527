// Peak probes (see peak.h). Each thread runs independent FMA chains long enough to hide the FMA
// latency (12 accumulators > latency 4 x 2 pipes), so the figure is throughput-bound.
#include "kernels/cpu/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cpu/isa.h"

namespace dlb::cpu {

namespace {
using Clock = std::chrono::steady_clock;
constexpr long kInner = 1 << 14;

// flops per call: 12 accumulators x 8 lanes x 2 flop x kInner
__attribute__((target("avx2,fma"))) float fma_loop_avx2(long reps) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.001f * i);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kInner; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f"))) float fma_loop_avx512(long reps) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(0.001f * i);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kInner; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

float fma_loop_scalar(long reps) {
  float a[12];
  for (int i = 0; i < 12; ++i) a[i] = 0.001f * i;
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < kInner; ++k)
      for (int i = 0; i < 12; ++i) a[i] = a[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : a) s += v;
  return s;
}

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

float (*fma_loop(int* lanes, std::string* isa))(long) {
  if (isa_allows(Isa::avx512)) {  // under the DLB_CPU_ISA cap (isa.h)
    *lanes = 16, *isa = "avx512f";
    return fma_loop_avx512;
  }
  if (isa_allows(Isa::avx2)) {
    *lanes = 8, *isa = "avx2+fma";
    return fma_loop_avx2;
  }
  *lanes = 1, *isa = "scalar";
  return fma_loop_scalar;
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
