// The engine charges each case's device bytes to the case (kernels/common/device_bytes.h): in a
// window of cases set up together, each case's peak is its own and covers its timed iterations, not
// its verification. Fake cases "allocate" host buffers' addresses through the process's ledger, as
// cuda_util's device_alloc does with real ones; their annotate() records the peak as a GPU case's.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bench/case.h"
#include "harness/run/engine.h"
#include "kernels/common/device_bytes.h"

using namespace dlb;
using namespace dlb::bench;
using dlb::harness::measure;
using dlb::harness::Ordering;
using dlb::harness::Peaks;
using dlb::harness::PlannedCase;
using dlb::harness::TimingPolicy;
using nlohmann::json;

namespace {
// Holds `held` bytes from setup to teardown, a twice-as-large twin during verify only, and `step`
// bytes during each run.
class ChargingCase : public Case {
 public:
  ChargingCase(std::size_t held, std::size_t step) : held_(held), step_(step) {}
  void setup() override { device_bytes().add(&held_, held_); }
  CheckResult verify() override {
    device_bytes().add(&twin_, 2 * held_);
    device_bytes().remove(&twin_);
    return judge(0, 1e-6);
  }
  double run() override {
    device_bytes().add(&step_, step_);
    device_bytes().remove(&step_);
    return 1e-3;
  }
  void annotate(json& r) const override {
    r["peak_device_bytes"] = device_bytes().peak();
    r["current_device_bytes"] = device_bytes().current();
  }
  void teardown() override { device_bytes().remove(&held_); }
  bool manual_time() const override { return true; }
  long iterations() const override { return 1; }
  Work work() const override { return {1e6, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }

 private:
  std::size_t held_, step_;
  char twin_ = 0;
};
}  // namespace

TEST(DevicePeak, EachCaseOfAWindowHasItsOwnPeakOfItsTimedSteps) {
  const std::size_t sizes[][2] = {{1000, 10}, {50, 5}, {200000, 7000}};
  std::vector<CaseSpec> specs;
  for (int i = 0; i < 3; ++i) {
    CaseId id{"fake", "op", "cuda:0", "fp32", {}};
    id.with("size", i);
    const std::size_t held = sizes[i][0], step = sizes[i][1];
    specs.push_back({id, [held, step] { return std::make_unique<ChargingCase>(held, step); }});
  }
  std::vector<PlannedCase> window;
  for (std::size_t i = 0; i < specs.size(); ++i) window.push_back({&specs[i], i});
  TimingPolicy p;
  p.repetitions = 3, p.min_time = 0.001, p.retry_noisy = false;
  const std::size_t process0 = device_bytes().current();
  const auto w = measure(window, p, Ordering::interleaved(1), Peaks{});
  ASSERT_EQ(w.cases.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const json& r = w.cases[i].record;
    ASSERT_TRUE(r.value("verified", false)) << r.dump();
    // held + one step's: not the window's sum, not the verification's twin
    EXPECT_EQ(r.at("peak_device_bytes").get<std::size_t>(), sizes[i][0] + sizes[i][1]);
    EXPECT_EQ(r.at("current_device_bytes").get<std::size_t>(), sizes[i][0]);
  }
  EXPECT_EQ(device_bytes().current(), process0);  // all returned at teardown
}
