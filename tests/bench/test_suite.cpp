// Suite declarations (bench/suite.h): every registered suite is well formed, options() merges
// defaults, --quick and flags, an undeclared axis is a bug, and a suite declared in one file (here,
// in this test) is planned and run by the harness with no other edit, its derived keys included.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "bench/suite.h"
#include "harness/results.h"
#include "harness/run/plan.h"
#include "harness/run/run.h"

using namespace dlb;
using nlohmann::json;

namespace {

// A toy suite: two fake cases (work and time fixed by the case), a derived key, a summary.
class ToyCase : public bench::Case {
 public:
  explicit ToyCase(long n) : n_(n) {}
  CheckResult verify() override { return judge(0.0, 1e-6); }
  double run() override { return 1e-3 * double(n_); }
  bool manual_time() const override { return true; }
  long iterations() const override { return 2; }
  bench::Work work() const override { return {1e6 * double(n_), 0, 0}; }
  bench::Metric metric() const override { return bench::Metric::gflops; }

 private:
  long n_;
};

std::vector<bench::CaseSpec> toy_cases(const bench::SuiteOptions& o) {
  std::vector<bench::CaseSpec> out;
  for (long long n : bench::axis_ints(o, "n")) {
    bench::CaseId id{"test_toy", "op", "cpu", "fp32", {}};
    id.with("n", n);
    out.push_back({id, [n] { return std::make_unique<ToyCase>(n); }});
  }
  return out;
}

// Each summary entry's time relative to the first case's: a key across cases.
void toy_derive(std::vector<json>& entries) {
  double first = 0;
  for (const auto& e : entries)
    if (e.value("aggregate_name", "") == "median" && e.value("n", 0) == 1) first = e.value("real_time", 0.0);
  for (auto& e : entries)
    if (e.value("aggregate_name", "") == "median" && first > 0) e["time_vs_n1"] = e.value("real_time", 0.0) / first;
}

DLB_SUITE(test_toy)
    .about("a toy suite declared by tests/bench/test_suite.cpp")
    .axis("n", {1, 2, 3}, {1, 2})
    .no_blas_from_pool()
    .cases(toy_cases)
    .derived(toy_derive);

}  // namespace

TEST(Suite, RegisteredSuitesAreWellFormed) {
  std::set<std::string> names;
  for (const bench::Suite* s : bench::all_suites()) {
    SCOPED_TRACE(s->name);
    EXPECT_TRUE(names.insert(s->name).second);
    EXPECT_FALSE(s->description.empty());
    EXPECT_TRUE(static_cast<bool>(s->expand));
    for (const auto& a : s->axes) {
      EXPECT_TRUE(a.values.is_array()) << a.name;
      EXPECT_TRUE(a.quick.is_null() || a.quick.is_array()) << a.name;
    }
    for (const auto& f : s->flags) {
      EXPECT_EQ(f.name.rfind("--", 0), 0u) << f.name;
      if (!f.axis) continue;
      // A flag that overrides an axis names one the suite declares (else the override goes nowhere).
      EXPECT_TRUE(std::any_of(s->axes.begin(), s->axes.end(), [&](const bench::Axis& a) { return a.name == f.key; })) << f.name;
    }
  }
  for (const char* s : {"lecture", "train", "matmul", "conv", "amp", "transfer", "dist"}) EXPECT_TRUE(names.count(s)) << s;
  EXPECT_TRUE(std::is_sorted(bench::all_suites().begin(), bench::all_suites().end(),
                             [](const bench::Suite* a, const bench::Suite* b) { return a->name < b->name; }));
}

TEST(Suite, FlagsAreDeclaredPerSuite) {
  auto takes = [](const char* suite, const char* flag) { return bench::find_suite(suite)->flag_named(flag) != nullptr; };
  EXPECT_TRUE(takes("matmul", "--sizes"));
  EXPECT_FALSE(takes("matmul", "--batch"));
  EXPECT_FALSE(takes("conv", "--sizes"));
  EXPECT_FALSE(takes("lecture", "--sizes"));  // its images are --images
  EXPECT_TRUE(takes("lecture", "--images"));
  EXPECT_TRUE(takes("dist", "--sizes"));
  EXPECT_FALSE(takes("dist", "--images"));  // not in the old table: it accepted every flag
  EXPECT_EQ(bench::find_suite("transfer")->flag_named("--sizes")->parse, bench::FlagSpec::Parse::bytes);
  EXPECT_EQ(bench::find_suite("dist")->flag_named("--sizes")->parse, bench::FlagSpec::Parse::size_sweep);
  EXPECT_TRUE(bench::find_suite("dist")->distributed);
  EXPECT_FALSE(bench::find_suite("matmul")->blas_from_pool);
  EXPECT_TRUE(bench::find_suite("conv")->blas_from_pool);
}

TEST(Suite, OptionsMergeDefaultsQuickAndOverrides) {
  const bench::Suite& m = *bench::find_suite("matmul");
  const auto full = m.options(false), quick = m.options(true);
  EXPECT_GT(full.axes.at("size").size(), quick.axes.at("size").size());
  EXPECT_EQ(full.axes.at("dtype"), quick.axes.at("dtype"));  // no quick values: the defaults
  EXPECT_FALSE(full.was_given("size"));
  const auto over = m.options(true, {{"size", {77}}});
  EXPECT_EQ(over.axes.at("size"), json::array({77}));
  EXPECT_TRUE(over.was_given("size"));
  EXPECT_EQ(over.suite, "matmul");
}

TEST(Suite, UndeclaredAxisIsABug) {
  const auto o = bench::find_suite("test_toy")->options(false);
  EXPECT_EQ(bench::axis_ints(o, "n"), (std::vector<long long>{1, 2, 3}));
  EXPECT_THROW(bench::axis_ints(o, "size"), std::logic_error);
  EXPECT_THROW(bench::axis_strings(o, "model"), std::logic_error);
  EXPECT_THROW(bench::register_suite("test_toy"), std::logic_error);  // declared twice
}

TEST(Suite, ToySuiteRunsEndToEnd) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/dlb_test_suite_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  harness::RunOptions o;
  o.suites = {"test_toy"};
  o.device = "cpu";
  o.quick = true;
  o.repetitions = 3;
  o.min_time = 1e-3;
  o.report = false;
  o.out = dir;
  o.seed_given = true;
  EXPECT_EQ(harness::plan_run(o).names,
            (std::vector<std::string>{"test_toy/op/cpu/fp32/n=1", "test_toy/op/cpu/fp32/n=2"}));  // --quick's n
  ASSERT_EQ(harness::run_suites(o), 0);
  const json doc = harness::load_results(dir + "/results.json");
  EXPECT_EQ(doc.at("context").at("run").at("state"), "complete");
  int medians = 0;
  for (const auto& e : doc.at("benchmarks")) {
    if (e.value("aggregate_name", "") != "median") continue;
    ++medians;
    EXPECT_NEAR(e.at("real_time").get<double>(), 1000.0 * e.at("n").get<double>(), 1e-6);  // us, manual time
    EXPECT_NEAR(e.at("time_vs_n1").get<double>(), e.at("n").get<double>(), 1e-9) << e.dump();
  }
  EXPECT_EQ(medians, 2);
  std::filesystem::remove_all(dir);
}

// amp's speedup_vs_fp32 comes from the finished fp32 case at the same point, whichever ran first.
TEST(Suite, AmpSpeedupIsDerivedAcrossCases) {
  auto entry = [](const char* dtype, const char* agg, double us, const char* model = "mlp") {
    json e = {{"suite", "amp"}, {"op", "train"}, {"device", "cpu"}, {"dtype", dtype}, {"model", model}, {"batch", 64},
              {"real_time", us}, {"repetitions", 2}};
    e["run_type"] = agg[0] ? "aggregate" : "iteration";
    if (agg[0]) e["aggregate_name"] = agg;
    return e;
  };
  std::vector<json> es = {entry("bf16", "", 40), entry("bf16", "median", 50), entry("bf16", "stddev", 3),
                          entry("fp32", "", 90), entry("fp32", "median", 100), entry("bf16", "median", 25, "net128")};
  bench::find_suite("amp")->derive(es);
  EXPECT_DOUBLE_EQ(es[0].at("speedup_vs_fp32").get<double>(), 2.5);  // a repetition against fp32's median
  EXPECT_DOUBLE_EQ(es[1].at("speedup_vs_fp32").get<double>(), 2.0);
  EXPECT_FALSE(es[2].contains("speedup_vs_fp32"));  // not a time of the case
  EXPECT_FALSE(es[4].contains("speedup_vs_fp32"));  // fp32 itself
  EXPECT_FALSE(es[5].contains("speedup_vs_fp32"));  // no fp32 case for net128
}
