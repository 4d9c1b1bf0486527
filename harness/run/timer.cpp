// Google Benchmark's loop for one repetition (see timer.h): a benchmark registered, run once with a
// reporter that keeps its run, and cleared.
#include "harness/run/timer.h"

#include <chrono>
#include <exception>
#include <new>
#include <vector>

#include "bench/case.h"

namespace dlb::harness {

namespace {
using Run = benchmark::BenchmarkReporter::Run;

class Keep : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration) run = r;
  }
  std::optional<Run> run;
};
}  // namespace

std::optional<Run> time_repetition(bench::Case& c, const std::string& name, long iterations, double min_time,
                                   double warmup) {
  bench::Case* cp = &c;
  const bool manual = c.manual_time();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [cp, manual](benchmark::State& st) {
    for (auto _ : st) {
      try {
        const double s = cp->run();
        if (manual) st.SetIterationTime(s);
      } catch (const std::bad_alloc&) {
        st.SkipWithError("out of memory: a host allocation failed");
        break;
      } catch (const std::exception& e) {
        st.SkipWithError(e.what());  // OutOfMemory's message starts "out of memory" (records.cpp)
        break;
      }
    }
  });
  b->Repetitions(1)->Unit(benchmark::kMicrosecond);
  if (manual) b->UseManualTime();
  else b->UseRealTime();
  if (iterations > 0) {
    b->Iterations(iterations);
    // Google Benchmark has no warm-up with a fixed iteration count: run untimed for `warmup` seconds.
    try {
      const auto t0 = std::chrono::steady_clock::now();
      while (warmup > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < warmup) c.run();
    } catch (const std::exception&) {  // the timed run meets it again and records it
    }
  } else {
    b->MinTime(min_time);
    if (warmup > 0) b->MinWarmUpTime(warmup);
  }
  Keep keep;
  benchmark::RunSpecifiedBenchmarks(&keep);
  benchmark::ClearRegisteredBenchmarks();
  return keep.run;
}

}  // namespace dlb::harness
