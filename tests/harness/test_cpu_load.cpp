// Tests for harness/cpu_load: the foreign-CPU probe `run` records with every case ("foreign_cpu").
// The share itself depends on whatever else runs on the machine, so only its range and its
// accounting of our own threads are checked, never a value.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/resource.h>

#include "harness/cpu_load.h"

using dlb::harness::ForeignCpuProbe;

TEST(CpuLoad, TooShortIsUnknown) {
  const ForeignCpuProbe p;
  EXPECT_TRUE(std::isnan(p.fraction()));  // under 20 ms: too little time to tell
}

TEST(CpuLoad, ShareIsAFractionAndOurOwnThreadsDoNotCount) {
  // Every CPU kept busy by this process's own threads for 300 ms: whatever the machine does
  // meanwhile, foreign share + our own share of the CPUs cannot exceed 1 (were our threads counted
  // as foreign, the probe would say ~1 on top of our own share).
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  auto self_s = [] {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  };
  const double self0 = self_s();
  const auto t0 = std::chrono::steady_clock::now();
  const ForeignCpuProbe p;
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (unsigned i = 0; i < n; ++i)
    spin.emplace_back([&] {
      volatile double x = 1;
      while (!stop.load(std::memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : spin) t.join();
  const double f = p.fraction();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double own = (self_s() - self0) / (wall * n);
  ASSERT_TRUE(std::isfinite(f)) << "/proc/stat unreadable";
  EXPECT_GE(f, 0.0);
  EXPECT_LE(f, 1.0);
  EXPECT_GT(own, 0.0);
  EXPECT_LE(f + own, 1.05) << "foreign " << f << " + own " << own << ": our own threads counted as other processes";
}

// The core-to-core round trip the runner records per round ("core_round_trip_ns"): a finite, positive
// time on a machine with two CPUs to pin to, NaN with one, and the caller's own CPU affinity is left
// as it was.
TEST(CpuLoad, CoreRoundTripIsMeasuredWhereTwoCpusExist) {
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const double ns = dlb::harness::core_round_trip_ns();
  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  if (CPU_COUNT(&before) < 2) {
    EXPECT_TRUE(std::isnan(ns));
    GTEST_SKIP() << "one CPU: no round trip to measure";
  }
  EXPECT_TRUE(std::isfinite(ns));
  EXPECT_GT(ns, 0.0);
}

