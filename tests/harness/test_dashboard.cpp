// Tests for harness/dashboard and the multi-machine history under it: every machine's runs in one
// folder become one History each (the latest run's machine first); the page's data has a line per
// machine per case, steps, current regressions (slower step or failed in the latest run), links to
// each run's report or results; strict loading refuses what the text history only warns about; the
// written page embeds the data so that no case name can end its <script>.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/dashboard.h"
#include "harness/history.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dlb::harness;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("dlb-test-dashboard-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// One run of machine `cpu` on day `day`: each case 3 repetitions around its time (failed when < 0).
void write_run(const fs::path& dir, const std::string& cpu, int day, const std::vector<std::pair<std::string, double>>& cases) {
  char date[40];
  std::snprintf(date, sizeof date, "2026-05-%02dT08:00:00+0000", day);
  json b = json::array();
  for (const auto& [name, t] : cases) {
    for (int r = 0; r < 3; ++r) {
      json e = {{"name", name}, {"run_name", name}, {"run_type", "iteration"}, {"repetitions", 3}, {"repetition_index", r},
                {"real_time", t * (1 + 0.001 * r)}, {"cpu_time", t}, {"time_unit", "us"}, {"verified", true}};
      if (t < 0) e = {{"name", name}, {"run_name", name}, {"error_occurred", true}, {"error_message", "wrong"}, {"real_time", 0}};
      b.push_back(e);
      if (t < 0) break;
    }
  }
  const json ctx = {{"date", date},
                    {"cpu", {{"model", cpu}}},
                    {"openblas", {{"version", "0.3.21"}, {"core", "Zen"}}},
                    {"cuda", {{"gpus", json::array()}, {"runtime", "n/a"}, {"cublas", 0}, {"cudnn", 0}}},
                    {"git", {{"sha", "0123456789abcdef" + std::to_string(day)}, {"dirty", false}}}};
  fs::create_directories(dir);
  std::ofstream(dir / "results.json") << json{{"context", ctx}, {"benchmarks", b}}.dump();
}

// Machine A: 8 runs, "mm/gemm/cpu/fp32/size=64" 30% slower from run 5; machine B (later runs): 4
// runs, "conv/fwd/cpu/fp32/b=2" failed in its latest. Run 1 of A has a report.
void write_history(const fs::path& dir) {
  for (int i = 1; i <= 8; ++i)
    write_run(dir / ("a" + std::to_string(i)), "cpu A", i, {{"mm/gemm/cpu/fp32/size=64", i >= 5 ? 130 : 100}, {"conv/fwd/cpu/fp32/b=2", 50}});
  for (int i = 1; i <= 4; ++i)
    write_run(dir / ("b" + std::to_string(i)), "cpu B", 20 + i, {{"mm/gemm/cpu/fp32/size=64", 80}, {"conv/fwd/cpu/fp32/b=2", i == 4 ? -1 : 40}});
  fs::create_directories(dir / "a1" / "report");
  std::ofstream(dir / "a1" / "report" / "index.html") << "<p>report</p>";
}

}  // namespace

TEST(Dashboard, HistoriesOfEveryMachine) {
  TempDir dir("machines");
  write_history(dir.path);
  const auto hs = load_histories(dir.path.string(), HistoryOptions{});
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0].key, "cpu B | OpenBLAS 0.3.21 Zen");  // the latest run's machine first
  EXPECT_EQ(hs[0].runs.size(), 4u);
  EXPECT_EQ(hs[1].runs.size(), 8u);
  EXPECT_TRUE(hs[0].cases[1].failed_latest);
  ASSERT_TRUE(hs[1].cases[0].step.found);
  EXPECT_NEAR(hs[1].cases[0].step.ratio, 1.3, 1e-3);
  // load_history keeps following the latest run's machine only.
  EXPECT_EQ(load_history(dir.path.string(), HistoryOptions{}).runs.size(), 4u);
}

TEST(Dashboard, DataHasLinesStepsRegressionsAndLinks) {
  TempDir dir("data");
  write_history(dir.path / "hist");
  const fs::path out = dir.path / "site";
  const json d = dashboard_json(load_histories((dir.path / "hist").string(), HistoryOptions{}), HistoryOptions{}, out.string());
  EXPECT_EQ(d.at("runs").get<int>(), 12);
  ASSERT_EQ(d.at("machines").size(), 2u);
  ASSERT_EQ(d.at("cases").size(), 2u);
  const json& mm = d.at("cases").at(0);
  EXPECT_EQ(mm.at("suite"), "mm");
  EXPECT_EQ(mm.at("device"), "cpu");
  ASSERT_EQ(mm.at("lines").size(), 2u);  // one per machine
  const json& slow = mm.at("lines").at(1);
  EXPECT_EQ(slow.at("m").get<int>(), 1);
  EXPECT_EQ(slow.at("step").at("i").get<int>(), 4);
  EXPECT_TRUE(slow.at("regression").get<bool>());
  // The failed case first, then the slower step.
  ASSERT_EQ(d.at("regressions").size(), 2u);
  EXPECT_TRUE(d.at("regressions").at(0).at("failed").get<bool>());
  EXPECT_EQ(d.at("regressions").at(1).at("case").get<int>(), 0);
  EXPECT_NEAR(d.at("regressions").at(1).at("ratio").get<double>(), 1.3, 1e-3);
  // Links relative to the page's folder: the report where there is one, else results.json.
  const json& a_runs = d.at("machines").at(1).at("runs");
  EXPECT_EQ(a_runs.at(0).at("href"), "../hist/a1/report/index.html");
  EXPECT_EQ(a_runs.at(1).at("href"), "../hist/a2/results.json");
  EXPECT_EQ(a_runs.at(0).at("git"), "0123456789");
}

TEST(Dashboard, StrictLoadingRefusesWhatTextHistoryWarnsAbout) {
  TempDir dir("strict");
  write_history(dir.path);
  fs::create_directories(dir.path / "broken");
  std::ofstream(dir.path / "broken" / "results.json") << "{\"context\": {";
  HistoryOptions o;
  EXPECT_EQ(load_histories(dir.path.string(), o).size(), 2u);  // warned and left out
  o.strict = true;
  EXPECT_THROW(load_histories(dir.path.string(), o), dlb::InputError);
  fs::remove_all(dir.path / "broken");
  ASSERT_EQ(::mkfifo((dir.path / "pipe").c_str(), 0600), 0);
  try {
    load_histories(dir.path.string(), o);
    FAIL() << "a FIFO in the history folder was accepted";
  } catch (const dlb::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pipe"), std::string::npos) << e.what();
  }
}

TEST(Dashboard, PageEmbedsTheDataSafely) {
  TempDir dir("page");
  write_run(dir.path / "hist" / "r1", "cpu A", 1, {{"x/</script><b>/cpu/fp32", 10}});
  write_run(dir.path / "hist" / "r2", "cpu A", 2, {{"x/</script><b>/cpu/fp32", 10}});
  const DashboardSummary s = write_dashboard((dir.path / "hist").string(), HistoryOptions{}, (dir.path / "site").string());
  EXPECT_EQ(s.machines, 1u);
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.cases, 1u);
  EXPECT_EQ(s.regressions, 0u);
  std::ifstream f(dir.path / "site" / "index.html");
  const std::string page((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(page.find("{{"), std::string::npos);  // both markers filled
  EXPECT_NE(page.find("x/\\u003c/script>\\u003cb>/cpu/fp32"), std::string::npos);
  std::size_t closes = 0;
  for (std::size_t at = 0; (at = page.find("</script>", at)) != std::string::npos; ++at) ++closes;
  EXPECT_EQ(closes, 2u);  // the data's and the renderer's own, nothing from the case name
  EXPECT_THROW(write_dashboard((dir.path / "hist").string(), HistoryOptions{}, "/proc/dlbench-dashboard"), dlb::UsageError);
}
