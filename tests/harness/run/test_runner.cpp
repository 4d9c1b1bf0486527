// The engine's policy on fake cases (back to back: a window of one): verified before timed, failures never timed, out of memory
// and unsupported recorded, throughput and the Google Benchmark entry layout.
#include <gtest/gtest.h>

#include <atomic>

#include "bench/case.h"
#include "harness/run/engine.h"
#include "harness/run/run.h"
#include "kernels/common/errors.h"

using namespace dlb;
using namespace dlb::bench;
using dlb::harness::Peaks;
using dlb::harness::run_case;
using dlb::harness::TimingPolicy;
using nlohmann::json;

namespace {
struct Counters {
  std::atomic<int> runs{0}, verifies{0};
};

class FakeCase : public Case {
 public:
  enum class Mode { good, wrong, oom, unsupported, throws_in_run };
  FakeCase(Mode m, Counters* c) : m_(m), c_(c) {}
  void setup() override {
    if (m_ == Mode::oom) throw OutOfMemory("fake 1 TB buffer");
    if (m_ == Mode::unsupported) throw Unsupported("no avx512_bf16 on this CPU");
  }
  CheckResult verify() override {
    ++c_->verifies;
    return judge(m_ == Mode::wrong ? 0.5 : 1e-7, 1e-5);
  }
  double run() override {
    ++c_->runs;
    if (m_ == Mode::throws_in_run) throw std::runtime_error("device lost");
    volatile double x = 0;
    for (int i = 0; i < 1000; ++i) x = x + i;
    return 0;
  }
  Work work() const override { return {1e6, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }

 private:
  Mode m_;
  Counters* c_;
};

CaseSpec spec(FakeCase::Mode m, Counters* c) {
  CaseId id{"fake", "op", "cpu", "fp32", {}};
  id.with("size", 7).with("impl", "x");
  return {id, [m, c] { return std::make_unique<FakeCase>(m, c); }};
}

TimingPolicy quick() {
  TimingPolicy p;
  p.repetitions = 3;
  p.min_time = 0.001;
  p.retry_noisy = false;
  return p;
}
}  // namespace

TEST(Runner, GoodCaseIsVerifiedThenTimed) {
  Counters c;
  json record;
  Peaks peaks;
  peaks.cpu_fp32_gflops = 100;
  auto entries = run_case(spec(FakeCase::Mode::good, &c), 0, quick(), peaks, record);
  EXPECT_EQ(c.verifies, 1);
  EXPECT_GT(c.runs, 0);
  int iters = 0, aggs = 0;
  for (const auto& e : entries) {
    EXPECT_EQ(e.at("run_name"), "fake/op/cpu/fp32/size=7/impl=x");
    EXPECT_EQ(e.at("suite"), "fake");
    EXPECT_EQ(e.at("size"), 7);
    EXPECT_EQ(e.at("verified"), true);
    EXPECT_EQ(e.at("time_unit"), "us");
    if (e.at("run_type") == "iteration") {
      ++iters;
      EXPECT_GT(e.at("real_time").get<double>(), 0);
      EXPECT_TRUE(e.contains("gflops"));
      EXPECT_TRUE(e.contains("pct_of_peak"));
    } else {
      ++aggs;
      EXPECT_EQ(e.at("name"), "fake/op/cpu/fp32/size=7/impl=x_" + e.at("aggregate_name").get<std::string>());
    }
  }
  EXPECT_EQ(iters, 3);
  EXPECT_GE(aggs, 3);  // mean, median, stddev (+ cv)
  EXPECT_EQ(record.at("aggregate_name"), "median");
}

TEST(Runner, WrongResultIsRecordedAndNeverTimed) {
  Counters c;
  json record;
  auto entries = run_case(spec(FakeCase::Mode::wrong, &c), 0, quick(), Peaks{}, record);
  EXPECT_EQ(c.runs, 0);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("verified"), false);
  EXPECT_EQ(entries[0].at("error_occurred"), true);
  EXPECT_NE(entries[0].at("error_message").get<std::string>().find("verification failed"), std::string::npos);
  EXPECT_FALSE(entries[0].contains("gflops"));
}

TEST(Runner, OutOfMemoryIsAResult) {
  Counters c;
  json record;
  auto entries = run_case(spec(FakeCase::Mode::oom, &c), 0, quick(), Peaks{}, record);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("error"), "out of memory");
  EXPECT_EQ(c.verifies, 0);
  EXPECT_EQ(c.runs, 0);
}

TEST(Runner, UnsupportedIsSkippedWithReason) {
  Counters c;
  json record;
  auto entries = run_case(spec(FakeCase::Mode::unsupported, &c), 0, quick(), Peaks{}, record);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].at("skipped"), "no avx512_bf16 on this CPU");
}

TEST(Runner, ErrorWhileTimingIsRecorded) {
  Counters c;
  json record;
  auto entries = run_case(spec(FakeCase::Mode::throws_in_run, &c), 0, quick(), Peaks{}, record);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(record.value("error_occurred", false), true);
  EXPECT_NE(record.value("error_message", "").find("device lost"), std::string::npos);
}

TEST(Runner, ThroughputAndPeak) {
  json e;
  dlb::harness::add_throughput(e, 0.5, 1e9, 0, 0, "gflops", 4.0);
  EXPECT_DOUBLE_EQ(e.at("gflops").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(e.at("pct_of_peak").get<double>(), 50.0);
  json t;
  dlb::harness::add_throughput(t, 2.0, 0, 0, 100, "imgs_per_s", 0);
  EXPECT_DOUBLE_EQ(t.at("imgs_per_s").get<double>(), 50.0);
  EXPECT_FALSE(t.contains("pct_of_peak"));
}

TEST(Runner, ResolveDevices) {
  using dlb::harness::resolve_devices;
  EXPECT_EQ(resolve_devices("cpu"), std::vector<std::string>{"cpu"});
  auto all = resolve_devices("all");
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0], "cpu");
  EXPECT_THROW(resolve_devices("tpu"), UsageError);
  EXPECT_THROW(resolve_devices("cuda:x"), UsageError);
  EXPECT_THROW(resolve_devices("cuda:9999"), UsageError);
}

// The window's ceiling is its largest probe: a 2-repetition window on a shared VM probed 176 and 235
// GFLOP/s, and their median put conv rows at 108-111% of "peak".
TEST(Runner, WindowCeilingIsTheLargestProbe) {
  EXPECT_DOUBLE_EQ(harness::window_cpu_ceiling({176.0, 235.0}), 235.0);
  EXPECT_DOUBLE_EQ(harness::window_cpu_ceiling({230.0, 120.0, 228.0}), 230.0);
  EXPECT_DOUBLE_EQ(harness::window_cpu_ceiling({}), 0.0);
}

// A measured run's CPU case with FLOPs: % of peak against the FMA peak probed around its rounds.
TEST(Runner, CpuPercentOfPeakIsAgainstTheWindowProbe) {
  Counters c;
  json record;
  Peaks peaks;
  peaks.cpu_fp32_gflops = 1e-3;  // a run-start probe nothing could match: the window's must replace it
  peaks.threads = 1;
  peaks.measured = true;
  auto entries = run_case(spec(FakeCase::Mode::good, &c), 0, quick(), peaks, record);
  ASSERT_TRUE(record.contains("cpu_peak_gflops")) << record.dump();
  const double peak = record.at("cpu_peak_gflops").get<double>();
  EXPECT_GT(peak, 0.1);  // any FMA unit does more than 0.1 GFLOP/s
  EXPECT_GE(record.at("cpu_peak_probes").get<int>(), 3);  // one per round
  EXPECT_GE(record.at("cpu_peak_spread").get<double>(), 1.0);
  EXPECT_NEAR(record.at("pct_of_peak").get<double>(), 100.0 * record.at("gflops").get<double>() / peak, 1e-9);
  // Without measured peaks (a test's Peaks, a run on no CPU case) there is no probe.
  Peaks fake;
  fake.cpu_fp32_gflops = 100;
  json plain;
  run_case(spec(FakeCase::Mode::good, &c), 0, quick(), fake, plain);
  EXPECT_FALSE(plain.contains("cpu_peak_gflops"));
}
