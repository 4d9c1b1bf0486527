// Results folders are never lost or mixed: the lock, refusing a used folder, --force, reading back a
// folder to resume (a cut-off last line), the run header and the run state a reader derives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "harness/results.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;
using dlb::harness::load_results;
using dlb::harness::OutMode;
using dlb::harness::ResultsWriter;
using dlb::harness::run_state;
using json = nlohmann::json;

namespace {
fs::path tmpdir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("dlbench-safety-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
std::string read(const fs::path& p) {
  std::stringstream ss;
  ss << std::ifstream(p).rdbuf();
  return ss.str();
}
json entry(const std::string& name) { return {{"name", name}, {"run_name", name}, {"real_time", 1.0}}; }
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dlb::UsageError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ResultsSafety, SecondWriterOnALockedFolderNamesTheHolder) {
  auto d = tmpdir("lock");
  ResultsWriter a(d.string());
  const std::string msg = error_of([&] { ResultsWriter b(d.string(), OutMode::force); });
  EXPECT_NE(msg.find("in use by another dlbench run (pid " + std::to_string(::getpid()) + " on "), std::string::npos) << msg;
  fs::remove_all(d);
}

TEST(ResultsSafety, UsedFolderIsRefusedUnlessForced) {
  auto d = tmpdir("refuse");
  {
    ResultsWriter w(d.string());
    w.write_header({{"planned", {"a", "b"}}});
    w.append({entry("a")});
  }
  const std::string before = read(d / "results.jsonl");
  const std::string msg = error_of([&] { ResultsWriter w(d.string()); });
  EXPECT_NE(msg.find("already holds results; use --resume"), std::string::npos) << msg;
  EXPECT_EQ(read(d / "results.jsonl"), before);  // untouched
  {
    ResultsWriter w(d.string(), OutMode::force);
    EXPECT_TRUE(w.entries().empty());
  }
  EXPECT_EQ(read(d / "results.jsonl"), "");
  fs::remove_all(d);
}

TEST(ResultsSafety, ResumeKeepsEntriesAndDropsACutOffLine) {
  auto d = tmpdir("resume");
  {
    ResultsWriter w(d.string());
    w.write_header({{"planned", {"a", "b", "c"}}});
    w.append({entry("a"), entry("a")});
    w.append({entry("b")});
  }
  std::ofstream(d / "results.jsonl", std::ios::app) << "{\"name\": \"c\", \"real_ti";  // killed mid-write
  {
    ResultsWriter w(d.string(), OutMode::resume);
    EXPECT_EQ(w.stored_header().at("planned").size(), 3u);
    ASSERT_EQ(w.entries().size(), 3u);
    w.append({entry("c")});
  }
  std::ifstream f(d / "results.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded()) << "line " << n + 1 << ": " << line;
    ++n;
  }
  EXPECT_EQ(n, 5);  // header + a, a, b, c
  auto doc = load_results((d / "results.jsonl").string());
  EXPECT_EQ(doc["benchmarks"].size(), 4u);  // the header is not an entry
  EXPECT_EQ(run_state(doc).state, "complete");
  EXPECT_EQ(run_state(doc).done, 3u);
  fs::remove_all(d);
}

TEST(ResultsSafety, ResumeNeedsSomethingToResume) {
  auto d = tmpdir("nothing");
  fs::create_directories(d);
  EXPECT_NE(error_of([&] { ResultsWriter w(d.string(), OutMode::resume); }).find("nothing to resume"), std::string::npos);
  std::ofstream(d / "results.jsonl") << entry("a").dump() << "\n";  // an older dlbench: no header
  EXPECT_NE(error_of([&] { ResultsWriter w(d.string(), OutMode::resume); }).find("no run header"), std::string::npos);
  fs::remove_all(d);
}

TEST(ResultsSafety, TempFileIsPrivateAndRemoved) {
  auto d = tmpdir("tmp");
  ResultsWriter w(d.string());
  w.write_json({{"x", 1}});
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  fs::remove_all(d);
}

TEST(ResultsSafety, RunStateFromContextAndPlan) {
  json doc = {{"context", {{"run", {{"planned", {"a", "b"}}, {"state", "running"}}}}},
              {"benchmarks", {entry("a"), entry("a")}}};
  auto st = run_state(doc);
  EXPECT_EQ(st.state, "incomplete");  // died without a word (SIGKILL)
  EXPECT_EQ(st.done, 1u);
  EXPECT_EQ(st.planned, 2u);
  EXPECT_EQ(st.describe(), "incomplete, 1 of 2 cases");
  doc["context"]["run"]["state"] = "interrupted";
  EXPECT_EQ(run_state(doc).state, "interrupted");
  doc["context"]["run"]["state"] = "complete";
  doc["benchmarks"].push_back(entry("b"));
  EXPECT_TRUE(run_state(doc).complete());
  // Files from before the plan was recorded: complete unless marked interrupted.
  json old = {{"context", {{"run", {{"interrupted", false}}}}}, {"benchmarks", {entry("a")}}};
  EXPECT_TRUE(run_state(old).complete());
  old["context"]["run"]["interrupted"] = true;
  EXPECT_EQ(run_state(old).state, "interrupted");
  EXPECT_TRUE(run_state(json{{"benchmarks", json::array()}}).complete());
}
