// A suite declared once, in its own bench/<suite>.cpp, and registered by that file alone:
//
//   DLB_SUITE(matmul)
//       .about("C = A x B: OpenBLAS, oneDNN, cuBLAS, our CUDA kernels")
//       .axis("size", {128, 256, 512}, /*--quick*/ {128, 512})
//       .axis("dtype", {"fp32", "bf16"})
//       .takes({flag::sizes(), flag::dtype()})
//       .cases(expand)        // SuiteOptions -> the cases, in sweep order
//       .summary(summarize);  // tables printed after the run
//
// Axes: default and --quick values, written here only; a flag that overrides one names it (flag::batch()
// -> "batch"); the axis names are the record keys. Flags: the run flags the suite uses; any other one
// is refused for it. Cross-case keys (a speed-up over another case's time) come from .derive(), over
// the finished entries, never from one case reading another's results.
#pragma once
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/case.h"

namespace dlb::bench {

using json = nlohmann::json;

// A run flag a suite takes. The harness adds one command-line option per name over all suites and
// parses it by `parse`; the value overrides axis `key` or goes into SuiteOptions::extra[key].
struct FlagSpec {
  enum class Parse {
    ints,        // "64,4,2": positive, no duplicates, at most `max` (0: no cap)
    bytes,       // ints with units: 1MB, 256KiB
    size_sweep,  // bytes, and ranges a..b doubling (8B..1GiB)
    dtypes,      // fp32,tf32,fp16,bf16
    words,       // a list from `choices` ("all" alone, when a choice)
    word,        // one of `choices`
    on,          // a switch: true when given
    counts,      // ints that may be 0 (worker counts: "0,1,2")
    text,        // one string as given (a loader spec, a folder): the suite checks it
  };
  std::string name;  // "--batch"
  std::string help;
  std::string key;   // the axis or extra key it sets
  bool axis = true;  // false: into SuiteOptions::extra
  Parse parse = Parse::ints;
  long long max = 0;
  std::vector<std::string> choices = {};
};

// The flags the suites share (a suite may declare its own FlagSpec too). Functions, not globals: the
// declarations that use them run during static initialisation, in no set order across files.
namespace flag {
const FlagSpec& sizes();       // --sizes: square matrix sizes (ints)
const FlagSpec& size_bytes();  // --sizes with units (1MB, 256KiB)
const FlagSpec& size_sweep();  // --sizes with units and ranges (8B..1GiB)
const FlagSpec& batch();
const FlagSpec& images();
const FlagSpec& dtype();
const FlagSpec& input();       // GPU input pipelines -> axis "input"
const FlagSpec& cuda_graph();  // -> extra "cuda_graph"
const FlagSpec& peer();        // -> extra "peer"
const FlagSpec& profile();     // -> extra "profile"
const FlagSpec& loader();      // --loader SPEC (the data loader's options, or "lecture") -> extra "loader"
}  // namespace flag

// What a suite's cases() gets: its axes after the defaults, --quick and the flags' overrides.
struct SuiteOptions {
  std::string suite;
  json axes = json::object();
  std::vector<std::string> given;    // axes a flag set (--sizes -> "size")
  bool quick = false;
  std::vector<std::string> devices;  // "cpu", "cuda:0", ... (only devices that exist)
  json extra = json::object();       // non-axis flags: "cuda_graph", "peer", "profile"
  int repetitions = 0;               // the user's --repetitions (0: not given)
  bool was_given(const std::string& axis) const;
};

struct Axis {
  std::string name;
  json values, quick;  // quick: null = the same as values
};

struct Suite {
  std::string name, description;
  std::vector<Axis> axes;
  std::vector<FlagSpec> flags;
  // Its CPU cases call OpenBLAS from every kernel-pool thread (buffers are reserved per thread up front).
  bool blas_from_pool = true;
  // Runs across MPI ranks (harness/dist.cpp): every rank times the same cases in lockstep, so back to
  // back only; every core is a rank's (no CPU peak probe); --ranks; not resumable.
  bool distributed = false;
  std::function<std::vector<CaseSpec>(const SuiteOptions&)> expand;
  // Optional: keys computed across cases from the suite's finished entries (iterations and
  // aggregates), e.g. speedup_vs_fp32. Rerun on every write, so it must only add keys.
  std::function<void(std::vector<json>& entries)> derive;
  // Optional: tables printed after the run from one record per case (its median entry, or its failure).
  std::function<void(const std::vector<json>& records, std::ostream& out)> summarize;

  // The declaration's builder (DLB_SUITE(x).about(...).axis(...)...).
  Suite& about(std::string text);
  Suite& axis(std::string axis_name, json values, json quick_values = json());
  Suite& takes(std::initializer_list<FlagSpec> specs);
  Suite& cases(std::function<std::vector<CaseSpec>(const SuiteOptions&)> f);
  Suite& derived(std::function<void(std::vector<json>&)> f);
  Suite& summary(std::function<void(const std::vector<json>&, std::ostream&)> f);
  Suite& no_blas_from_pool();
  Suite& across_ranks();

  const FlagSpec* flag_named(const std::string& flag_name) const;
  // The axes for a run: defaults, then --quick's, then `overrides` (axis -> values).
  SuiteOptions options(bool quick, const json& overrides = json::object()) const;
};

// Registers a suite (DLB_SUITE); the suites in name order; one by name or nullptr.
Suite& register_suite(const char* name);
const std::vector<const Suite*>& all_suites();
const Suite* find_suite(const std::string& name);

// Axis access for expand(): the axis as a list. An axis the options do not hold is a bug in the
// suite (every axis it reads is declared): std::logic_error.
std::vector<long long> axis_ints(const SuiteOptions& o, const std::string& key);
std::vector<std::string> axis_strings(const SuiteOptions& o, const std::string& key);

// For derive(): whether an entry is its case's summary, the median aggregate or the only repetition.
bool summary_entry(const json& e);

}  // namespace dlb::bench

#define DLB_SUITE_CAT2(a, b) a##b
#define DLB_SUITE_CAT(a, b) DLB_SUITE_CAT2(a, b)
// DLB_SUITE(name) at namespace scope: declares and registers suite `name` before main runs.
#define DLB_SUITE(name) \
  [[maybe_unused]] static ::dlb::bench::Suite& DLB_SUITE_CAT(dlb_suite_, name) = ::dlb::bench::register_suite(#name)
