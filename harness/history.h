// `dlbench history DIR`: many results folders of one machine, ordered by context.date, as a trend
// table per case (median of each run, latest vs first) with a step flag for sustained shifts.
//
// Step (change-point) detection, per case, on the log of the run medians y_1..y_T: every split into
// a left and a right segment of at least `min_segment` runs is tried; the one with the largest
// |mean(right) - mean(left)| = |d| is kept. It is flagged when the shift exceeds the threshold
// (|exp(d) - 1| > threshold) and the noise: |d| > 3 * s * sqrt(1/nL + 1/nR), with s the pooled
// standard deviation within the two segments, floored by what the runs' own repetitions say about
// the precision of a run's median (1.2533 * robust cv / sqrt(repetitions), the median's standard
// error), so that a few lucky, consistent runs do not make a shift inside the noise "significant".
#pragma once
#include <cstddef>
#include <iosfwd>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compare.h"

namespace dlb::harness {

struct Step {
  bool found = false;
  std::size_t at = 0;  // index (into the series) of the first value after the step
  double ratio = std::numeric_limits<double>::quiet_NaN();  // exp(mean right - mean left of the logs)
  double score = 0;    // |d| / (s * sqrt(1/nL + 1/nR)); flagged above 3
};

// `values` > 0 in time order; `noise` the relative standard error of each value from its run's own
// repetitions (may be empty). Needs 2 * min_segment values.
Step detect_step(const std::vector<double>& values, const std::vector<double>& noise, std::size_t min_segment,
                 double threshold);

struct HistoryOptions {
  double threshold = 0.05;
  std::size_t min_segment = 3;
  TimeField time = TimeField::real;
  // An entry of the folder that is no folder or file (a FIFO), or a run that does not load, is an
  // InputError instead of a run left out with a warning (the published dashboard hides nothing).
  bool strict = false;
};

struct HistoryRun {
  std::string path, date, git;
  double when = 0;  // date in seconds since the epoch
};

struct CaseTrend {
  std::string name;
  std::vector<std::size_t> runs;  // indexes into History::runs where the case was timed
  std::vector<double> medians_us;
  std::vector<double> noise;      // relative standard error of each median (from its repetitions)
  Step step;
  bool failed_latest = false;     // failed in the latest run
};

struct History {
  std::string key;                 // the machine
  std::vector<HistoryRun> runs;    // sorted by date
  std::vector<CaseTrend> cases;
  std::vector<std::string> warnings;  // folders skipped (unreadable, other machines, no date)
};

// Loads every results folder (or results.json/.jsonl file) directly inside `dir`. Folders that fail
// to load or carry no date are skipped with a warning; runs of other machines than the latest run's
// are left out with a warning. InputError when `dir` is missing or holds no usable run.
History load_history(const std::string& dir, const HistoryOptions& opts);

// Every machine's history in `dir`: one History per machine key, the machine of the latest run first;
// the warnings go with the first.
std::vector<History> load_histories(const std::string& dir, const HistoryOptions& opts);

void print_history(std::ostream& out, const History& h, const HistoryOptions& opts);
nlohmann::json history_json(const History& h);

// Per case, the between-run noise floor of a machine: the largest spread of the case's medians over
// the runs in `dir` (history: one results folder per run, same machine), max / min - 1. Cases timed
// in fewer than 3 runs get none. InputError when `dir` holds fewer than 3 usable runs.
std::map<std::string, double> learned_floors(const std::string& dir, TimeField time, std::size_t* runs = nullptr);

// "2026-11-22T04:12:02+0000" (context.date) -> seconds since the epoch (UTC); NaN if unparsable.
double parse_date(const std::string& s);

}  // namespace dlb::harness
