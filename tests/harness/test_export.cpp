// Tests for harness/export: the trackers' formats of the fixture run tests/data/export (a GEMM with
// GFLOP/s, a training step with images/s, energy and memory, a host copy with GB/s, a case with no
// throughput whose name needs CSV quoting, a failed and a skipped case): medians, the repetitions'
// spread, units, what is left out, and the shape each tool reads.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "harness/export.h"
#include "harness/results.h"
#include "kernels/common/errors.h"

using json = nlohmann::json;
using namespace dlb::harness;

namespace {

const std::string kRun = std::string(DLB_TEST_DATA_DIR) + "/export";

std::map<std::string, ExportCase> fixture_cases() {
  std::map<std::string, ExportCase> m;
  for (auto& c : export_cases(load_results(kRun), kRun)) m[c.name] = c;
  return m;
}

}  // namespace

TEST(Export, MediansSpreadAndUnitsPerCase) {
  auto m = fixture_cases();
  ASSERT_EQ(m.size(), 6u);
  const ExportCase& g = m.at("matmul/gemm/cpu/fp32/impl=openblas/size=256");
  EXPECT_EQ(g.state, "timed");
  EXPECT_EQ(g.repetitions, 5u);
  EXPECT_DOUBLE_EQ(g.time_us, 101);  // median of 100, 102, 98, 110, 101
  EXPECT_DOUBLE_EQ(g.time_min_us, 98);
  EXPECT_DOUBLE_EQ(g.time_max_us, 110);
  ASSERT_NE(g.metric, nullptr);
  EXPECT_STREQ(g.metric->unit, "GFLOP/s");
  EXPECT_NEAR(g.value, 33554.432 / 101, 1e-9);  // the throughput at the median time
  EXPECT_NEAR(g.lower, 33554.432 / 110, 1e-9);  // the slowest repetition
  EXPECT_NEAR(g.upper, 33554.432 / 98, 1e-9);

  const ExportCase& t = m.at("lecture/train_step/cpu/fp32/model=net128/batch=64");
  ASSERT_NE(t.metric, nullptr);
  EXPECT_STREQ(t.metric->unit, "images/s");  // its headline, though it carries GFLOP/s too
  EXPECT_NEAR(t.value, 4000, 1e-9);
  ASSERT_EQ(t.measures.size(), 2u);
  EXPECT_EQ(t.measures[0].first, "host-peak-rss-bytes");
  EXPECT_EQ(t.measures[1].first, "energy-joules");

  EXPECT_STREQ(m.at("transfer/h2d/cpu/fp32/size=1MiB").metric->unit, "GB/s");
  const ExportCase& n = m.at("custom/loop/cpu/fp32/label=a,b\"c");
  EXPECT_EQ(n.metric, nullptr);  // no throughput recorded: iterations per second
  EXPECT_DOUBLE_EQ(n.time_us, 23.5);
  EXPECT_NEAR(n.value, 1e6 / 23.5, 1e-6);

  EXPECT_EQ(m.at("conv/conv2d_fwd/cpu/fp32/layer=x/impl=direct").state, "failed");
  EXPECT_EQ(m.at("matmul/gemm/cuda:0/fp32/impl=cublas/size=256").state, "skipped");
}

TEST(Export, GithubActionBenchmarkShape) {
  const auto doc = load_results(kRun);
  const auto cases = export_cases(doc, kRun);
  // customBiggerIsBetter / customSmallerIsBetter: a JSON array of {name, value (number), unit,
  // range, extra (strings)}; the action's range parser wants "± <number>".
  const std::regex range(R"(^± [0-9][0-9.e+-]*$)");
  for (const bool bigger : {true, false}) {
    const json a = json::parse(export_text(cases, bigger ? ExportFormat::gab_bigger : ExportFormat::gab_smaller, doc));
    ASSERT_TRUE(a.is_array());
    EXPECT_EQ(a.size(), 4u);  // the failed and the skipped case are left out
    for (const auto& e : a) {
      EXPECT_TRUE(e.at("name").is_string());
      EXPECT_TRUE(e.at("value").is_number());
      EXPECT_TRUE(e.at("unit").is_string());
      EXPECT_TRUE(std::regex_match(e.at("range").get<std::string>(), range)) << e.at("range");
      EXPECT_NE(e.at("extra").get<std::string>().find("git: abcdef012345"), std::string::npos);
    }
    EXPECT_EQ(a[0].at("unit"), bigger ? "GFLOP/s" : "us/iter");
    EXPECT_DOUBLE_EQ(a[0].at("value").get<double>(), bigger ? 33554.432 / 101 : 101.0);
    // half the span of the repetitions: (33554.432 / 98 - 33554.432 / 110) / 2 GFLOP/s, (110 - 98) / 2 us
    EXPECT_EQ(a[0].at("range"), bigger ? "± 18.6759" : "± 6");
  }
}

TEST(Export, BencherMetricFormat) {
  const auto doc = load_results(kRun);
  const json b = json::parse(export_text(export_cases(doc, kRun), ExportFormat::bencher, doc));
  ASSERT_TRUE(b.is_object());
  EXPECT_EQ(b.size(), 4u);
  const json& g = b.at("matmul/gemm/cpu/fp32/impl=openblas/size=256");
  EXPECT_DOUBLE_EQ(g.at("latency").at("value").get<double>(), 101e3);  // nanoseconds, Bencher's latency unit
  EXPECT_DOUBLE_EQ(g.at("latency").at("lower_value").get<double>(), 98e3);
  EXPECT_DOUBLE_EQ(g.at("latency").at("upper_value").get<double>(), 110e3);
  EXPECT_TRUE(g.contains("throughput-gflops"));
  const json& t = b.at("lecture/train_step/cpu/fp32/model=net128/batch=64");
  EXPECT_DOUBLE_EQ(t.at("throughput-imgs-per-s").at("value").get<double>(), 4000);
  EXPECT_DOUBLE_EQ(t.at("energy-joules").at("value").get<double>(), 0.5);
  EXPECT_TRUE(b.at("transfer/h2d/cpu/fp32/size=1MiB").contains("throughput-gb-per-s"));
  for (const auto& [name, measures] : b.items())
    for (const auto& [m, v] : measures.items()) {
      EXPECT_TRUE(v.at("value").is_number()) << name << " " << m;
      if (v.contains("lower_value")) {
        EXPECT_LE(v.at("lower_value").get<double>(), v.at("value").get<double>()) << name << " " << m;
        EXPECT_GE(v.at("upper_value").get<double>(), v.at("value").get<double>()) << name << " " << m;
      }
    }
}

TEST(Export, CsvHasEveryCaseAndQuotes) {
  const auto doc = load_results(kRun);
  std::istringstream s(export_text(export_cases(doc, kRun), ExportFormat::csv, doc));
  std::vector<std::string> lines;
  for (std::string l; std::getline(s, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 7u);  // header + every case, failed and skipped included
  EXPECT_EQ(lines[0].substr(0, 29), "name,suite,op,device,dtype,st");
  EXPECT_EQ(lines[4].substr(0, 35), "\"custom/loop/cpu/fp32/label=a,b\"\"c\"");
  EXPECT_NE(lines[5].find(",failed,0,"), std::string::npos);
  EXPECT_NE(lines[6].find(",skipped,0,"), std::string::npos);
}

TEST(Export, FormatNames) {
  EXPECT_EQ(parse_export_format("github-action-benchmark-bigger"), ExportFormat::gab_bigger);
  EXPECT_EQ(parse_export_format("github-action-benchmark-smaller"), ExportFormat::gab_smaller);
  EXPECT_EQ(parse_export_format("bencher"), ExportFormat::bencher);
  EXPECT_EQ(parse_export_format("csv"), ExportFormat::csv);
  EXPECT_THROW(parse_export_format("googlecpp"), dlb::UsageError);
  EXPECT_THROW(parse_export_format(""), dlb::UsageError);
}
