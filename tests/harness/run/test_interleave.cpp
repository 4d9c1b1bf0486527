// Interleaved timing (the engine over a window, harness/run/engine.h) on fake cases: every case of a window is set up and
// verified before any is timed, rounds run each case once in a seeded shuffled order, the entries have
// the back-to-back layout, failures are recorded untimed, noisy cases get extra rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/case.h"
#include "harness/run/engine.h"
#include "kernels/common/errors.h"
#include "tests/child_holding.h"

using namespace dlb;
using namespace dlb::bench;
using dlb::harness::Peaks;
using dlb::harness::run_case;
using dlb::harness::measure;
using dlb::harness::Ordering;
using dlb::harness::PlannedCase;
using dlb::harness::TimingPolicy;
using nlohmann::json;

namespace {
constexpr std::size_t kChildBytes = 64u << 20;
// free: --min-time decides iterations; child_holds: a child process holds 64 MiB (a peer's Python)
enum class Mode { good, wrong, oom, unsupported, noisy, free, child_holds };

// What every fake case did, in order: "setup 3", "verify 3", "run 3", ...
struct Log {
  std::vector<std::string> events;
  int first(const std::string& what) const {
    for (std::size_t i = 0; i < events.size(); ++i)
      if (events[i].rfind(what, 0) == 0) return static_cast<int>(i);
    return -1;
  }
  int last(const std::string& what) const {
    int at = -1;
    for (std::size_t i = 0; i < events.size(); ++i)
      if (events[i].rfind(what, 0) == 0) at = static_cast<int>(i);
    return at;
  }
};

class FakeCase : public Case {
 public:
  FakeCase(Mode m, int id, Log* log) : m_(m), id_(std::to_string(id)), log_(log) {}
  void setup() override {
    log_->events.push_back("setup " + id_);
    if (m_ == Mode::oom) throw OutOfMemory("fake 1 TB buffer");
    if (m_ == Mode::unsupported) throw Unsupported("no such unit here");
    if (m_ == Mode::child_holds) child_ = std::make_unique<test::ChildHolding>(kChildBytes);
  }
  void teardown() override { child_.reset(); }
  CheckResult verify() override {
    log_->events.push_back("verify " + id_);
    return judge(m_ == Mode::wrong ? 0.5 : 1e-7, 1e-5);
  }
  double run() override {
    log_->events.push_back("run " + id_);
    // noisy: one repetition (one iteration) in two takes twice as long (manual time)
    return m_ == Mode::noisy ? (calls_++ % 2 ? 2e-3 : 1e-3) : 1e-3;
  }
  bool manual_time() const override { return true; }
  long iterations() const override { return m_ == Mode::free ? 0 : m_ == Mode::noisy ? 1 : 2; }
  Work work() const override { return {1e6, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }

 private:
  Mode m_;
  std::string id_;
  Log* log_;
  long calls_ = 0;
  std::unique_ptr<test::ChildHolding> child_;
};

struct Specs {
  std::vector<CaseSpec> specs;
  std::vector<PlannedCase> window() const {
    std::vector<PlannedCase> w;
    for (std::size_t i = 0; i < specs.size(); ++i) w.push_back({&specs[i], i});
    return w;
  }
};

Specs make_specs(const std::vector<Mode>& modes, Log* log) {
  Specs s;
  for (std::size_t i = 0; i < modes.size(); ++i) {
    CaseId id{"fake", "op", "cpu", "fp32", {}};
    id.with("size", static_cast<int>(i));
    const Mode m = modes[i];
    const int n = static_cast<int>(i);
    s.specs.push_back({id, [m, n, log] { return std::make_unique<FakeCase>(m, n, log); }});
  }
  return s;
}

TimingPolicy policy() {
  TimingPolicy p;
  p.repetitions = 3;
  p.min_time = 0.001;
  p.retry_noisy = false;
  return p;
}

// The keys of each entry, but foreign_cpu: it is only known once a case or window was timed for 20 ms
// (cpu_load.h), which these millisecond fake cases reach or not depending on the build (a window's
// rounds also measure the core round trip, slower under the sanitizers).
std::vector<std::string> shape(const std::vector<json>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    std::string keys;
    for (const auto& [k, v] : e.items())
      if (k != "foreign_cpu") keys += k + ",";
    out.push_back(e.at("run_type").get<std::string>() + ":" + e.value("aggregate_name", "") + ":" + keys);
  }
  return out;
}
}  // namespace

TEST(Interleave, EntriesHaveTheBackToBackShape) {
  Log log;
  const Specs s = make_specs({Mode::good, Mode::good}, &log);
  json record;
  const auto b2b = run_case(s.specs[0], 0, policy(), Peaks{}, record);
  const auto w = measure(s.window(), policy(), Ordering::interleaved(1), Peaks{});
  ASSERT_FALSE(w.interrupted);
  ASSERT_EQ(w.cases.size(), 2u);
  EXPECT_EQ(shape(w.cases[0].entries), shape(b2b));  // same entries, same keys, same order
  const auto& e = w.cases[0].entries;
  ASSERT_EQ(e.size(), 3u + 4u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(e[k].at("repetition_index"), k);
    EXPECT_EQ(e[k].at("repetitions"), 3);
    EXPECT_EQ(e[k].at("iterations"), 2);
    EXPECT_NEAR(e[k].at("real_time").get<double>(), 1000.0, 1e-6);  // us, manual time
  }
  EXPECT_EQ(e[3].at("name"), "fake/op/cpu/fp32/size=0_mean");
  EXPECT_NEAR(e[3].at("real_time").get<double>(), 1000.0, 1e-6);
  EXPECT_NEAR(e[3].at("gflops").get<double>(), 1.0, 1e-9);  // 1e6 flop in 1 ms
  EXPECT_EQ(e[4].at("aggregate_name"), "median");
  EXPECT_EQ(e[6].at("aggregate_unit"), "percentage");
  EXPECT_EQ(w.cases[0].record.at("aggregate_name"), "median");
  // Google Benchmark's own aggregates of the same times agree with ours.
  for (std::size_t k = 3; k < b2b.size(); ++k)
    EXPECT_NEAR(b2b[k].at("real_time").get<double>(), e[k].at("real_time").get<double>(), 1e-6) << k;
}

TEST(Interleave, EveryCaseIsVerifiedBeforeAnyIsTimed) {
  Log log;
  const Specs s = make_specs({Mode::good, Mode::good, Mode::good, Mode::good, Mode::good}, &log);
  const auto w = measure(s.window(), policy(), Ordering::interleaved(7), Peaks{});
  ASSERT_EQ(w.cases.size(), 5u);
  EXPECT_EQ(w.rounds, 3);
  ASSERT_GE(log.first("run "), 0);
  EXPECT_LT(log.last("verify "), log.first("run "));
  EXPECT_LT(log.last("setup "), log.first("run "));
  for (const auto& c : w.cases) EXPECT_EQ(c.record.at("verified"), true);
}

TEST(Interleave, RoundsAreShuffledBySeed) {
  Log log;
  const Specs s = make_specs(std::vector<Mode>(8, Mode::good), &log);
  auto order = [&](std::uint64_t seed) {
    std::vector<std::size_t> o;
    const auto w = measure(s.window(), policy(), Ordering::interleaved(seed), Peaks{}, &o);
    EXPECT_EQ(w.cases.size(), 8u);
    return o;
  };
  const auto a = order(1), a2 = order(1), b = order(2);
  ASSERT_EQ(a.size(), 3u * 8u);
  EXPECT_EQ(a, a2);  // the seed decides the order
  EXPECT_NE(a, b);
  const std::vector<std::size_t> sweep = {0, 1, 2, 3, 4, 5, 6, 7};
  int in_sweep_order = 0;
  for (int r = 0; r < 3; ++r) {  // each round: every case once
    std::vector<std::size_t> round(a.begin() + 8 * r, a.begin() + 8 * (r + 1));
    in_sweep_order += round == sweep;
    std::sort(round.begin(), round.end());
    EXPECT_EQ(round, sweep) << "round " << r;
  }
  EXPECT_LT(in_sweep_order, 3);
}

TEST(Interleave, FailuresAreRecordedAndNeverTimed) {
  Log log;
  const Specs s = make_specs({Mode::wrong, Mode::good, Mode::unsupported}, &log);
  const auto w = measure(s.window(), policy(), Ordering::interleaved(3), Peaks{});
  ASSERT_EQ(w.cases.size(), 3u);
  EXPECT_EQ(w.cases[0].record.at("error_occurred"), true);
  EXPECT_EQ(w.cases[0].record.at("verified"), false);
  EXPECT_EQ(w.cases[0].entries.size(), 1u);
  EXPECT_EQ(w.cases[1].record.at("aggregate_name"), "median");
  EXPECT_TRUE(w.cases[2].record.contains("skipped"));
  EXPECT_EQ(log.first("run 0"), -1);
  EXPECT_EQ(log.first("run 2"), -1);
}

TEST(Interleave, OutOfMemoryBesideOthersOpensTheNextWindow) {
  Log log;
  const Specs s = make_specs({Mode::good, Mode::oom, Mode::good}, &log);
  const auto w = measure(s.window(), policy(), Ordering::interleaved(3), Peaks{});
  ASSERT_EQ(w.cases.size(), 1u);  // the oom case was not consumed: it is retried alone
  EXPECT_EQ(w.cases[0].record.at("aggregate_name"), "median");
  const std::vector<PlannedCase> alone = {{&s.specs[1], 1}};
  const auto w2 = measure(alone, policy(), Ordering::interleaved(3), Peaks{});
  ASSERT_EQ(w2.cases.size(), 1u);  // alone, it is a result: out of memory
  EXPECT_EQ(w2.cases[0].record.at("error"), "out of memory");
}

TEST(Interleave, WindowIsBoundedByCount) {
  Log log;
  const Specs s = make_specs(std::vector<Mode>(5, Mode::good), &log);
  const auto w = measure(s.window(), policy(), Ordering::interleaved(3, 2), Peaks{});
  EXPECT_EQ(w.cases.size(), 2u);
  EXPECT_EQ(log.first("setup 2"), -1);
}

// What a window's cases hold stays resident while each other is timed (the PyTorch peer's step ran
// 20-50% slower beside 3.5-5 GB held, harness/run/constants.h): the bound counts a case's child
// processes, and a window of one reports the case's peak with its child's.
TEST(Interleave, WindowIsBoundedByTheMemoryItsCasesAndTheirChildrenHold) {
  Log log;
  const Specs s = make_specs({Mode::child_holds, Mode::good, Mode::good}, &log);
  Ordering o = Ordering::interleaved(3);
  o.window_bytes = double(kChildBytes) / 2;
  const auto w = measure(s.window(), policy(), o, Peaks{});
  ASSERT_EQ(w.cases.size(), 1u);
  EXPECT_EQ(log.first("setup 1"), -1);
  const json& r = w.cases[0].record;
  EXPECT_EQ(r.at("aggregate_name"), "median");
  if (r.value("host_peak_rss_scope", "") == "case") {  // (where /proc/self/clear_refs resets the peak)
    EXPECT_GE(r.at("host_peak_rss_bytes").get<double>(), double(kChildBytes));
  }
  Log all;
  const Specs t = make_specs({Mode::child_holds, Mode::good, Mode::good}, &all);
  EXPECT_EQ(measure(t.window(), policy(), Ordering::interleaved(3), Peaks{}).cases.size(), 3u);  // 2 GB: room
}

TEST(Interleave, NoisyCaseGetsExtraRounds) {
  Log log;
  const Specs s = make_specs({Mode::good, Mode::noisy}, &log);
  TimingPolicy p = policy();
  p.retry_noisy = true;
  const auto w = measure(s.window(), p, Ordering::interleaved(5), Peaks{});
  ASSERT_EQ(w.cases.size(), 2u);
  EXPECT_EQ(w.cases[0].entries.front().at("repetitions"), 3);  // cv 0: no more
  EXPECT_EQ(w.cases[1].entries.front().at("repetitions"), 6);  // cv ~ 0.3: twice as many
  EXPECT_EQ(w.rounds, 6);
}

TEST(Interleave, TinyCasesGetTheLongerMinimumTime) {
  Log log;
  const Specs s = make_specs({Mode::free, Mode::good}, &log);
  TimingPolicy p = policy();
  p.repetitions = 2;
  p.tiny_min_time = 0.02;  // 1 ms iterations are under tiny_below_s = 2 ms: 20 ms repetitions
  p.tiny_below_s = 2e-3;
  const auto w = measure(s.window(), p, Ordering::interleaved(5), Peaks{});
  ASSERT_EQ(w.cases.size(), 2u);
  EXPECT_GE(w.cases[0].entries.front().at("iterations").get<long>(), 20);
  EXPECT_EQ(w.cases[0].entries[1].at("iterations"), w.cases[0].entries[0].at("iterations"));  // fixed after round 1
  EXPECT_EQ(w.cases[1].entries.front().at("iterations"), 2);  // the case's own count is kept
  p.tiny_min_time = 0;  // off (the user gave --min-time): 1 ms per repetition is enough
  const auto w2 = measure(s.window(), p, Ordering::interleaved(5), Peaks{});
  EXPECT_LT(w2.cases[0].entries.front().at("iterations").get<long>(), 20);
}
