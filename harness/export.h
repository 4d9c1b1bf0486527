// `dlbench export RUN --format F`: one run's cases in the formats the CI benchmark trackers read, one
// entry per case from the medians of its repetitions, the spread of the repetitions beside it, units
// named, nothing per repetition (docs/trackers.md):
//   github-action-benchmark-bigger   customBiggerIsBetter: [{name, value, unit, range, extra}], value =
//                                    the suite's throughput (GFLOP/s, images/s, GB/s) at the median time
//   github-action-benchmark-smaller  customSmallerIsBetter: the same with the median time (us/iter)
//   bencher                          Bencher Metric Format: {case: {measure: {value, lower_value,
//                                    upper_value}}}: latency (ns, Bencher's built-in measure), the
//                                    throughput, and memory and energy where recorded
//   csv                              a row per case, failed and skipped ones included with their state
// The spread: lower / upper = the slowest / fastest repetition (times: fastest / slowest); range =
// "± half that span", the form the action's range parser reads.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/records.h"

namespace dlb::harness {

enum class ExportFormat { gab_bigger, gab_smaller, bencher, csv };

// "github-action-benchmark-bigger" ... -> the format; UsageError naming the known ones otherwise.
ExportFormat parse_export_format(const std::string& name);
const char* export_format_names();  // "github-action-benchmark-bigger|...|csv", for help and errors

struct ExportCase {
  std::string name, suite, op, device, dtype;
  std::string state = "timed";  // timed | failed | oom | skipped
  std::string message;          // why a case is not timed
  std::size_t repetitions = 0;
  double time_us = std::numeric_limits<double>::quiet_NaN();  // median real time per iteration
  double time_min_us = time_us, time_max_us = time_us;         // the repetitions' spread
  const MetricInfo* metric = nullptr;                          // its throughput, when it has one
  double value = time_us, lower = time_us, upper = time_us;    // throughput at the median, slowest, fastest
  // Measures recorded once per case: host-peak-rss-bytes (per-case scope only), device-peak-bytes,
  // energy-joules (per timed iteration).
  std::vector<std::pair<std::string, double>> measures;
};

// The cases of a loaded results document (load_results) in file order; `label` names it in errors
// (InputError as compare's extract_cases: a case twice, a timed entry without a time).
std::vector<ExportCase> export_cases(const nlohmann::json& doc, const std::string& label);

// The text of `format` for those cases (JSON ends with a newline). `doc` gives the machine and git
// sha for the github-action-benchmark tooltips. Failed and skipped cases are left out of all but csv.
std::string export_text(const std::vector<ExportCase>& cases, ExportFormat format, const nlohmann::json& doc);

}  // namespace dlb::harness
