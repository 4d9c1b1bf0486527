// Planning a run: the suites' cases for the options (declared axes, --quick, the flags' overrides,
// --filter), and --resume's checks that a folder's stored run is this run.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/suite.h"
#include "harness/run/run.h"

namespace dlb::harness {

struct Plan {
  std::vector<std::string> devices;
  std::string device_note;                                    // e.g. "GPU cases skipped: ..."
  std::vector<std::pair<const bench::Suite*, bench::CaseSpec>> cases;  // in run order
  std::vector<std::string> names;                              // the cases' names, in run order
  bool distributed = false;                                    // a suite runs across ranks
};

// The suite called `name`, or UsageError naming the known ones.
const bench::Suite& suite_named(const std::string& name);

// Every case of opts.suites on the devices asked for, filtered. UsageError when nothing would run.
Plan plan_run(const RunOptions& opts);

// Each case's summary entry among `entries` by name: its median, else its first (a failure, or a
// single repetition).
std::map<std::string, nlohmann::json> records_by_case(const std::vector<nlohmann::json>& entries);

// --resume: the stored run must have the same flags, planned cases and only planned records
// (UsageError / InputError naming what differs). Returns the records kept: name -> its summary
// entry (median, else its first).
std::map<std::string, nlohmann::json> check_resume(const ResultsWriter& writer, const RunOptions& opts,
                                                   const Plan& plan);

}  // namespace dlb::harness
