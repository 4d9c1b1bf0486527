// GPU case timing without a GPU: the N-calls-per-event-pair calibration (bench/gpu_timing.h), the L2
// residency keys, and the harness reporting a case that makes N back-to-back calls per iteration
// (Case::calls_per_run) per call, back to back (run_case) and interleaved (measure over a window).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/case.h"
#include "bench/gpu_timing.h"
#include "harness/run/engine.h"

using namespace dlb;
using namespace dlb::bench;
using dlb::harness::Peaks;
using dlb::harness::TimingPolicy;
using nlohmann::json;

TEST(GpuTiming, CallsPerPairReachTheTarget) {
  EXPECT_EQ(calls_per_event_pair(5e-6, 1e-3), 200);   // a 5 us call: 200 calls = 1 ms
  EXPECT_EQ(calls_per_event_pair(3e-6, 1e-3), 334);   // rounded up: 334 x 3 us >= 1 ms
  EXPECT_EQ(calls_per_event_pair(1e-3, 1e-3), 1);     // one call already lasts the target
  EXPECT_EQ(calls_per_event_pair(0.25, 1e-3), 1);     // long calls: one per pair
  EXPECT_EQ(calls_per_event_pair(2e-4, 2e-3), 10);    // another target
  for (double t : {1e-7, 3.3e-6, 7e-5, 9.99e-4}) {
    const long n = calls_per_event_pair(t, 1e-3);
    EXPECT_GE(double(n) * t, 1e-3 * (1 - 1e-12)) << t;  // the pair lasts the target...
    EXPECT_LT(double(n - 1) * t, 1e-3) << t;            // ...with no call more than needed
  }
}

TEST(GpuTiming, CallsPerPairAreClampedAndSafe) {
  EXPECT_EQ(calls_per_event_pair(1e-9, 1e-3), 10000);          // default cap
  EXPECT_EQ(calls_per_event_pair(1e-9, 1e-3, 500), 500);       // a given cap
  EXPECT_EQ(calls_per_event_pair(0.0, 1e-3), 1);               // no time measured
  EXPECT_EQ(calls_per_event_pair(-1.0, 1e-3), 1);
  EXPECT_EQ(calls_per_event_pair(std::nan(""), 1e-3), 1);
  EXPECT_EQ(calls_per_event_pair(1e300 * 1e300, 1e-3), 1);     // inf
  EXPECT_EQ(calls_per_event_pair(1e-6, 0.0), 1);               // no target
  EXPECT_EQ(calls_per_event_pair(1e-6, 1e-3, 0), 1);           // a cap below 1 is 1
}

TEST(GpuTiming, L2ResidencyKeys) {
  json r;
  note_l2(r, 3.0 * 1024 * 1024 * 4, 50e6);  // three 1024^2 fp32 matrices (12.6 MB) in H100's 50 MB L2
  EXPECT_EQ(r.at("l2_resident"), true);
  EXPECT_DOUBLE_EQ(r.at("l2_bytes").get<double>(), 50e6);
  json big;
  note_l2(big, 3.0 * 4096 * 4096 * 4, 50e6);  // 201 MB
  EXPECT_EQ(big.at("l2_resident"), false);
  json unknown;
  note_l2(unknown, 1e6, 0);  // L2 size not readable: no verdict
  EXPECT_TRUE(unknown.contains("working_set_bytes"));
  EXPECT_FALSE(unknown.contains("l2_resident"));
}

namespace {
// A case whose run() makes 4 back-to-back "calls" of 1 ms and returns their total, as GpuCallTimer does.
class BatchedCase : public Case {
 public:
  explicit BatchedCase(long iters) : iters_(iters) {}
  CheckResult verify() override { return judge(0, 1e-5); }
  double run() override { return 4e-3; }
  long calls_per_run() const override { return 4; }
  bool manual_time() const override { return true; }
  long iterations() const override { return iters_; }
  Work work() const override { return {2e9, 0, 0}; }  // per call
  Metric metric() const override { return Metric::gflops; }

 private:
  long iters_;
};

CaseSpec batched_spec(long iters, int id) {
  CaseId cid{"fake", "op", "cpu", "fp32", {}};
  cid.with("size", id);
  return {cid, [iters] { return std::make_unique<BatchedCase>(iters); }};
}

TimingPolicy quick_policy() {
  TimingPolicy p;
  p.repetitions = 3;
  p.min_time = 0.01;
  p.retry_noisy = false;
  return p;
}

void expect_per_call(const std::vector<json>& entries, long gb_iters) {
  ASSERT_FALSE(entries.empty());
  int iterations = 0;
  for (const auto& e : entries) {
    ASSERT_FALSE(e.value("error_occurred", false)) << e.dump();
    const std::string agg = e.value("aggregate_name", "");
    if (agg == "cv" || agg == "stddev") continue;  // a constant fake time: 0
    EXPECT_NEAR(e.at("real_time").get<double>(), 1000.0, 1e-6) << e.dump();  // us per call, not per 4
    EXPECT_EQ(e.value("calls_per_iteration", 0), 4) << e.dump();  // the median (the case's record) too
    if (e.at("run_type") == "iteration") {
      ++iterations;
      if (gb_iters > 0) {
        EXPECT_EQ(e.at("iterations"), gb_iters * 4);  // calls timed
      }
      EXPECT_NEAR(e.at("gflops").get<double>(), 2000.0, 1e-6);        // 2 GFLOP per 1 ms call
    }
  }
  EXPECT_EQ(iterations, 3);
}
}  // namespace

TEST(GpuTiming, HarnessReportsPerCallBackToBack) {
  for (long iters : {2L, 0L}) {  // a fixed iteration count, and --min-time deciding it
    json record;
    const CaseSpec spec = batched_spec(iters, 0);
    const auto entries = dlb::harness::run_case(spec, 0, quick_policy(), Peaks{}, record);
    SCOPED_TRACE(iters);
    expect_per_call(entries, iters);
    EXPECT_NEAR(record.at("real_time").get<double>(), 1000.0, 1e-6);  // the median, per call
  }
}

TEST(GpuTiming, HarnessReportsPerCallInterleaved) {
  std::vector<CaseSpec> specs = {batched_spec(2, 0), batched_spec(0, 1)};
  const std::vector<dlb::harness::PlannedCase> window = {{&specs[0], 0}, {&specs[1], 1}};
  TimingPolicy p = quick_policy();
  p.tiny_min_time = 0.02;  // the tiny-case probe sees one run() of 4 ms: not tiny
  const auto w = dlb::harness::measure(window, p, dlb::harness::Ordering::interleaved(7), Peaks{});
  ASSERT_FALSE(w.interrupted);
  ASSERT_EQ(w.cases.size(), 2u);
  expect_per_call(w.cases[0].entries, 2);
  expect_per_call(w.cases[1].entries, 0);
}
