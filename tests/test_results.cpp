// Results on disk: jsonl appended per case, results.json written atomically, loader errors name the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/results.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;
using dlb::InputError;
using dlb::harness::load_results;
using dlb::harness::ResultsWriter;
using nlohmann::json;

namespace {
fs::path tmpdir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("dlbench-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
}  // namespace

TEST(Results, WriterCreatesFolderAndFlushesEachCase) {
  auto d = tmpdir("writer");
  {
    ResultsWriter w((d / "nested" / "run").string());
    w.append({{{"name", "a"}, {"real_time", 1.0}}});
    // Already on disk before results.json exists: an interrupted run keeps it.
    auto partial = load_results((d / "nested" / "run").string());
    ASSERT_EQ(partial["benchmarks"].size(), 1u);
    w.append({{{"name", "b"}, {"real_time", 2.0}}});
    w.write_json({{"host_name", "h"}});
  }
  auto doc = load_results((d / "nested" / "run").string());
  EXPECT_EQ(doc["context"]["host_name"], "h");
  ASSERT_EQ(doc["benchmarks"].size(), 2u);
  EXPECT_EQ(doc["benchmarks"][1]["name"], "b");
  fs::remove_all(d);
}

TEST(Results, UncreatableFolderIsUsageError) {
  EXPECT_THROW(ResultsWriter("/proc/dlbench-no/such"), dlb::UsageError);
}

TEST(Results, LoaderRejectsBadFilesNamingThem) {
  auto d = tmpdir("loader");
  fs::create_directories(d);
  write(d / "trunc.json", "{\"benchmarks\": [ {\"name\": ");
  write(d / "foreign.json", "{\"hello\": 1}");
  write(d / "binary.json", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  write(d / "empty.json", "");
  for (const char* f : {"trunc.json", "foreign.json", "binary.json", "empty.json", "missing.json"}) {
    try {
      load_results((d / f).string());
      ADD_FAILURE() << f << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
  fs::create_directories(d / "emptydir");
  EXPECT_THROW(load_results((d / "emptydir").string()), InputError);
  fs::remove_all(d);
}

TEST(Results, JsonlWithTruncatedLineIsRejected) {
  auto d = tmpdir("jsonl");
  fs::create_directories(d);
  write(d / "results.jsonl", "{\"name\": \"a\"}\n{\"name\": \"b\", \"re");
  EXPECT_THROW(load_results(d.string()), InputError);
  fs::remove_all(d);
}
