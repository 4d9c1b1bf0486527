// The shape of results.json, key by key, from a real quick run of the CLI (google/benchmark's output
// tests are the model): the context's keys and types (Google Benchmark's, then ours), each entry's
// keys and types, the rows per case (iterations 0..n-1, then mean, median, stddev, cv), and the
// counters. Keys may be added; none of these may go or change type (compare, report, history and
// Google Benchmark's own tools read them).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"

using nlohmann::json;

namespace {

enum class T { str, integer, number, boolean, array, object };

const char* type_name(T t) {
  switch (t) {
    case T::str: return "string";
    case T::integer: return "integer";
    case T::number: return "number";
    case T::boolean: return "boolean";
    case T::array: return "array";
    case T::object: return "object";
  }
  return "?";
}

bool has_type(const json& v, T t) {
  switch (t) {
    case T::str: return v.is_string();
    case T::integer: return v.is_number_integer();
    case T::number: return v.is_number();
    case T::boolean: return v.is_boolean();
    case T::array: return v.is_array();
    case T::object: return v.is_object();
  }
  return false;
}

// Every "a.b.c" key of `want` is in `doc` with its type.
void expect_keys(const json& doc, const std::vector<std::pair<std::string, T>>& want, const std::string& where) {
  for (const auto& [path, t] : want) {
    const json* v = &doc;
    std::size_t at = 0;
    bool found = true;
    while (found) {
      const std::size_t dot = path.find('.', at);
      const std::string key = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
      found = v->is_object() && v->contains(key);
      if (found) v = &v->at(key);
      if (dot == std::string::npos) break;
      at = dot + 1;
    }
    EXPECT_TRUE(found) << where << ": no key " << path;
    if (found) {
      EXPECT_TRUE(has_type(*v, t)) << where << ": " << path << " is not a " << type_name(t) << ": " << v->dump();
    }
  }
}

// One quick CPU run of two suites, two metrics (GFLOP/s, GB/s), two repetitions per case: its folder.
std::string quick_run() {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/dlb_results_format_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string cmd = std::string("'") + DLB_CLI_PATH + "' run --suite matmul,transfer --device cpu --quick --sizes 64 " +
                          "--filter 'impl=blocked/|memcpy' --repetitions 2 --no-report --out '" + dir + "' >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  return dir;
}

void check_context(const json& doc) {
  EXPECT_TRUE(doc.at("context").is_object());
  EXPECT_TRUE(doc.at("benchmarks").is_array());

  const json& c = doc.at("context");
  // Google Benchmark's context keys (its compare.py and CI actions read them).
  expect_keys(c, {{"date", T::str}, {"host_name", T::str}, {"executable", T::str}, {"num_cpus", T::integer},
                  {"mhz_per_cpu", T::integer}, {"cpu_scaling_enabled", T::boolean}, {"caches", T::array},
                  {"load_avg", T::array}, {"library_build_type", T::str}, {"library_version", T::str},
                  {"json_schema_version", T::integer}},
              "context");
  // The fingerprint (harness/fingerprint.cpp).
  expect_keys(c, {{"dlbench_version", T::str}, {"os", T::str}, {"compiler", T::str}, {"cuda_compiler", T::str},
                  {"cpu.model", T::str}, {"cpu.logical_cores", T::integer}, {"cpu.isa", T::array},
                  {"cpu.kernel_threads", T::integer}, {"cpu.isa_detected", T::str}, {"cpu.isa_cap", T::str},
                  {"onednn.available", T::boolean}, {"openblas.version", T::str}, {"openblas.config", T::str},
                  {"openblas.core", T::str}, {"openblas.threads", T::integer}, {"openblas.parallel", T::integer},
                  {"openblas.core_library", T::str}, {"openblas.core_mode", T::str}, {"openblas.core_reason", T::str},
                  {"cuda.built_with_cuda", T::boolean}, {"cuda.available", T::boolean}, {"cuda.reason", T::str},
                  {"cuda.driver", T::str}, {"cuda.runtime", T::str}, {"cuda.cublas", T::integer},
                  {"cuda.cudnn", T::integer}, {"cuda.gpus", T::array}, {"git.sha", T::str}, {"git.dirty", T::boolean},
                  {"argv", T::array}, {"env", T::object}},
              "context");
  // The measured ceilings and the run itself.
  expect_keys(c, {{"peaks.cpu_fp32_gflops", T::number}, {"peaks.cpu_mem_gb_per_s", T::number},
                  {"peaks.cpu_fma_isa", T::str}, {"peaks.threads", T::integer}, {"run.suites", T::array},
                  {"run.devices", T::array}, {"run.quick", T::boolean}, {"run.repetitions", T::integer},
                  {"run.min_time_s", T::number}, {"run.filter", T::str}, {"run.cases", T::integer},
                  {"run.interrupted", T::boolean}, {"run.planned", T::array}, {"run.state", T::str},
                  {"run.resumed", T::boolean}, {"run.wall_s", T::number}, {"run.timing.mode", T::str},
                  {"run.timing.seed", T::integer}, {"run.timing.window", T::integer},
                  {"run.timing.tiny_min_time_s", T::number}, {"run.timing.tiny_below_s", T::number}},
              "context");
  EXPECT_EQ(c.at("run").at("state"), "complete");
  EXPECT_EQ(c.at("run").at("timing").at("mode"), "interleaved");
  EXPECT_EQ(c.at("run").at("suites"), json::array({"matmul", "transfer"}));
  EXPECT_EQ(c.at("run").at("cases").get<std::size_t>(), c.at("run").at("planned").size());
}

void check_entries(const json& doc) {
  // Every entry: Google Benchmark's keys, then ours (the case's identity and verification).
  const std::vector<std::pair<std::string, T>> every = {
      {"name", T::str}, {"run_name", T::str}, {"run_type", T::str}, {"family_index", T::integer},
      {"per_family_instance_index", T::integer}, {"threads", T::integer}, {"repetitions", T::integer},
      {"iterations", T::integer}, {"real_time", T::number}, {"cpu_time", T::number}, {"time_unit", T::str},
      {"suite", T::str}, {"op", T::str}, {"device", T::str}, {"dtype", T::str}, {"cpu_isa", T::str},
      {"verified", T::boolean}, {"max_rel_err", T::number}, {"tolerance", T::number}, {"size", T::integer},
      {"setup_s", T::number}, {"verify_s", T::number},
      {"host_peak_rss_bytes", T::integer}, {"host_peak_rss_scope", T::str}, {"energy_note", T::str}};
  for (const auto& e : doc.at("benchmarks")) {
    const std::string where = e.value("name", "?");
    expect_keys(e, every, where);
    EXPECT_EQ(e.value("time_unit", ""), "us") << where;
    EXPECT_FALSE(e.value("error_occurred", false)) << where;
    EXPECT_GE(e.value("setup_s", -1.0), 0.0) << where;  // apart from the timing
    EXPECT_GE(e.value("verify_s", -1.0), 0.0) << where;
    const bool agg = e.value("run_type", "") == "aggregate";
    if (agg) {
      expect_keys(e, {{"aggregate_name", T::str}, {"aggregate_unit", T::str}}, where);
      EXPECT_EQ(e.value("name", ""), e.value("run_name", "") + "_" + e.value("aggregate_name", "")) << where;
    } else {
      expect_keys(e, {{"repetition_index", T::integer}}, where);
      EXPECT_EQ(e.value("name", ""), e.value("run_name", "")) << where;
      EXPECT_GT(e.value("real_time", 0.0), 0) << where;
    }
    // The counters: the throughput of the case's metric where a time is (iterations, mean, median).
    const bool timed = !agg || e.value("aggregate_name", "") == "mean" || e.value("aggregate_name", "") == "median";
    const bool matmul = e.value("suite", "") == "matmul";
    const std::string metric = matmul ? "gflops" : "gb_per_s";
    const std::string counter = matmul ? "items_per_second" : "bytes_per_second";  // Google Benchmark's
    if (timed) {
      expect_keys(e, {{metric, T::number}, {"pct_of_peak", T::number}, {counter, T::number}}, where);
      if (e.contains(metric) && e.contains(counter)) {
        EXPECT_NEAR(e.at(counter).get<double>(), e.at(metric).get<double>() * 1e9, 1e-6 * e.at(counter).get<double>()) << where;
      }
    }
    if (e.value("suite", "") == "matmul") expect_keys(e, {{"impl", T::str}, {"m", T::integer}, {"n", T::integer}, {"k", T::integer}}, where);
  }
}

void check_rows(const json& doc) {
  std::map<std::string, std::vector<const json*>> rows;  // run_name -> its entries, in order
  for (const auto& e : doc.at("benchmarks")) rows[e.at("run_name").get<std::string>()].push_back(&e);
  EXPECT_EQ(rows.size(), doc.at("context").at("run").at("planned").size());
  for (const auto& [name, es] : rows) {
    ASSERT_EQ(es.size(), 2u + 4u) << name;  // --repetitions 2: two iterations, four aggregates
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(es[k]->at("run_type"), "iteration") << name;
      EXPECT_EQ(es[k]->at("repetition_index"), k) << name;
      EXPECT_EQ(es[k]->at("repetitions"), 2) << name;
    }
    const char* aggs[] = {"mean", "median", "stddev", "cv"};
    for (int k = 0; k < 4; ++k) {
      const json& a = *es[2 + k];
      EXPECT_EQ(a.at("run_type"), "aggregate") << name;
      EXPECT_EQ(a.at("aggregate_name"), aggs[k]) << name;
      EXPECT_EQ(a.at("aggregate_unit"), k == 3 ? "percentage" : "time") << name;
      EXPECT_EQ(a.at("repetitions"), 2) << name;
      EXPECT_EQ(a.at("iterations"), 2) << name;  // Google Benchmark: an aggregate's iterations = repetitions
    }
    const double t0 = es[0]->at("real_time").get<double>(), t1 = es[1]->at("real_time").get<double>();
    EXPECT_NEAR(es[2]->at("real_time").get<double>(), (t0 + t1) / 2, 1e-9 * (t0 + t1)) << name;  // mean
    EXPECT_NEAR(es[3]->at("real_time").get<double>(), (t0 + t1) / 2, 1e-9 * (t0 + t1)) << name;  // median of two
  }
}

void check_jsonl(const std::string& dir, const json& doc) {
  std::ifstream in(dir + "/results.jsonl");
  std::string line;
  std::size_t entries = 0, headers = 0;
  while (std::getline(in, line)) {
    const json j = json::parse(line);
    if (j.contains(dlb::harness::kRunHeaderKey)) ++headers;
    else ++entries;
  }
  EXPECT_EQ(headers, 1u);
  EXPECT_EQ(entries, doc.at("benchmarks").size());
}

}  // namespace

// One run, then each part of the shape (one test: the run is the slow part).
TEST(ResultsFormat, QuickRunHasTheShape) {
  const std::string dir = quick_run();
  const json doc = dlb::harness::load_results(dir + "/results.json");
  {
    SCOPED_TRACE("context");
    check_context(doc);
  }
  {
    SCOPED_TRACE("entries");
    check_entries(doc);
  }
  {
    SCOPED_TRACE("rows per case");
    check_rows(doc);
  }
  {
    SCOPED_TRACE("results.jsonl");
    check_jsonl(dir, doc);
  }
  std::filesystem::remove_all(dir);
}
