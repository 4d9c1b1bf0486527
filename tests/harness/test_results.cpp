// Results on disk: jsonl appended per case, results.json written atomically, loader errors name the file.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
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

// Issue 13: hostile inputs. A FIFO or a device is refused without being read (this test would hang
// otherwise; CTest's timeout ends it), a file over the cap too; times must be positive and finite.
TEST(Results, FifoDeviceAndOversizedFileRefusedWithoutReading) {
  const auto d = tmpdir("hostile");
  fs::create_directories(d);
  const auto fifo = d / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(load_results(fifo.string()), InputError);
  EXPECT_THROW(load_results("/dev/zero"), InputError);
  fs::create_directories(d / "run");
  ASSERT_EQ(::mkfifo((d / "run" / "results.json").c_str(), 0600), 0);
  EXPECT_THROW(load_results((d / "run").string()), InputError);
  const auto big = d / "big.json";
  write(big, "");
  fs::resize_file(big, (std::uintmax_t(1) << 20) + 1);  // sparse
  ::setenv("DLBENCH_MAX_INPUT_MB", "1", 1);
  try {
    load_results(big.string());
    ADD_FAILURE() << "a file over DLBENCH_MAX_INPUT_MB was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cap"), std::string::npos) << e.what();
  }
  ::unsetenv("DLBENCH_MAX_INPUT_MB");
  fs::remove_all(d);
}

TEST(Results, BadTimesAndTypesNameFileAndEntry) {
  const auto d = tmpdir("badtimes");
  fs::create_directories(d);
  auto doc = [](const std::string& entry) {
    return "{\"context\": {\"git\": {\"sha\": \"x\", \"dirty\": false}}, \"benchmarks\": [" + entry + "]}";
  };
  const std::string ok = "{\"name\": \"a\", \"run_type\": \"iteration\", \"real_time\": 5, \"cpu_time\": 5, \"time_unit\": \"us\"}";
  write(d / "ok.json", doc(ok));
  EXPECT_NO_THROW(load_results((d / "ok.json").string()));
  // A failed case carries time 0 and is fine.
  write(d / "failed.json", doc("{\"name\": \"a\", \"real_time\": 0, \"error_occurred\": true}"));
  EXPECT_NO_THROW(load_results((d / "failed.json").string()));
  const std::vector<std::string> bad = {
      "{\"name\": \"a\", \"real_time\": 0}",     "{\"name\": \"a\", \"real_time\": -1}",
      "{\"name\": \"a\", \"real_time\": null}",  "{\"name\": \"a\", \"real_time\": \"5\"}",
      "{\"name\": \"a\", \"real_time\": 5, \"cpu_time\": -1}",
      "{\"name\": \"a\", \"real_time\": 5, \"verified\": \"yes\"}",
      "{\"name\": \"a\", \"real_time\": 5, \"error_occurred\": 1}",
      "{\"name\": \"a\", \"real_time\": 5, \"time_unit\": \"parsec\"}",
      "{\"name\": 5, \"real_time\": 5}"};
  for (const auto& e : bad) {
    write(d / "bad.json", doc(e));
    try {
      load_results((d / "bad.json").string());
      ADD_FAILURE() << "accepted: " << e;
    } catch (const InputError& x) {
      const std::string m = x.what();
      EXPECT_NE(m.find("bad.json"), std::string::npos) << m;
      EXPECT_NE(m.find("entry 1"), std::string::npos) << m;
    }
  }
  write(d / "dirty.json", "{\"context\": {\"git\": {\"dirty\": \"yes\"}}, \"benchmarks\": [" + ok + "]}");
  EXPECT_THROW(load_results((d / "dirty.json").string()), InputError);
  fs::remove_all(d);
}
