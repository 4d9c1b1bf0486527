// Run comparison for `dlbench compare`, `baseline check` and `history`: cases of two results files
// matched by run_name, per case the median change, a Mann-Whitney U test over the repetitions and
// the run's own noise band, then a verdict.
//
// Verdicts (thr = --threshold, a = --alpha, change = median NEW / median BASE - 1):
//   SLOWER  p < a and change > +thr                  -> a regression (exit 1)
//   FASTER  p < a and change < -thr
//   NOISY   |change| > thr but p >= a (the repetitions cannot confirm it), or the noise band
//           (the larger cv of the two sides' repetitions) is wider than thr, so SAME can't be trusted
//   SAME    otherwise
//   NEW     timed in NEW, absent (or failed / skipped) in BASE
//   GONE    timed in BASE, absent or skipped in NEW (a GPU case on a CPU-only runner); also a case
//           out of memory in NEW that was never timed in BASE either
//   FAILED  failed in NEW (verification or an error), or out of memory in NEW after being timed
//           in BASE -> exit 1
// Cases skipped in both runs are left out of the table and counted.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::harness {

enum class TimeField { real, cpu };  // which time of the repetitions is compared: real_time or cpu_time

// One case of one run as compare sees it.
struct CaseRun {
  enum class State { timed, failed, oom, skipped };
  std::string name;              // run_name: suite/op/device/dtype/key=value...
  State state = State::timed;
  std::vector<double> times_us;  // one per repetition, microseconds
  double median_us = std::numeric_limits<double>::quiet_NaN();
  double cv = 0;                 // of the repetitions (the "cv" aggregate when only aggregates exist)
  std::string message;           // error_message of a failed / skipped case
};

// The cases of a loaded results document (load_results), in file order. `label` names the source in
// errors: an entry that is not an object, or a timed entry without a numeric time -> InputError.
std::vector<CaseRun> extract_cases(const nlohmann::json& doc, const std::string& label,
                                   TimeField field = TimeField::real);

enum class Verdict { faster, slower, same, noisy, added, gone, failed };
const char* verdict_name(Verdict v);  // "FASTER", "SLOWER", "SAME", "NOISY", "NEW", "GONE", "FAILED"

struct CompareOptions {
  double threshold = 0.05;  // relative change of the median that matters
  double alpha = 0.05;      // significance level of the Mann-Whitney test
  TimeField time = TimeField::real;
};

struct CaseComparison {
  std::string name;
  Verdict verdict = Verdict::same;
  double base_us = std::numeric_limits<double>::quiet_NaN();  // medians
  double new_us = std::numeric_limits<double>::quiet_NaN();
  double ratio = std::numeric_limits<double>::quiet_NaN();    // new_us / base_us
  double p = std::numeric_limits<double>::quiet_NaN();        // two-sided Mann-Whitney p-value
  bool exact = false;                                         // p from the exact distribution
  std::size_t n_base = 0, n_new = 0;                          // repetitions
  double noise = std::numeric_limits<double>::quiet_NaN();    // noise band: max(cv BASE, cv NEW)
  bool fatal = false;                                         // counts toward exit 1
  std::string note;
};

// One case; either side may be null (absent from that run).
CaseComparison compare_case(const CaseRun* base, const CaseRun* neu, const CompareOptions& opts);

struct Comparison {
  CompareOptions opts;
  std::vector<CaseComparison> cases;  // NEW's order, then the cases only BASE has
  double geomean_ratio = std::numeric_limits<double>::quiet_NaN();  // over cases timed in both
  std::size_t shared = 0;             // cases timed in both
  std::size_t skipped_both = 0;
  std::string base_label, new_label;  // paths, for the header
  std::string base_about, new_about;  // date, git, machine key
  bool different_machines = false;    // both carry a fingerprint and the machine keys differ

  bool regression() const;
  // The one line for stderr on exit 1: which cases are slower (with their change) or failed.
  std::string regression_line() const;
};

Comparison compare_runs(const nlohmann::json& base, const std::string& base_label, const nlohmann::json& neu,
                        const std::string& new_label, const CompareOptions& opts);

void print_comparison(std::ostream& out, const Comparison& c);
nlohmann::json comparison_json(const Comparison& c);

// "5%" or "0.05" -> 0.05. Negative, non-numeric, or a bare number >= 1 (ambiguous: "5" might mean
// 5% or 500%) -> UsageError naming `flag`.
double parse_threshold(const std::string& text, const std::string& flag = "--threshold");
// A level in (0, 1) -> UsageError otherwise.
double parse_alpha(const std::string& text, const std::string& flag = "--alpha");
// "real" | "cpu" -> UsageError otherwise.
TimeField parse_time_field(const std::string& text);

// machine_key of the document's context, or "" when it carries no fingerprint (a results.jsonl).
std::string machine_key_or_empty(const nlohmann::json& doc);
// "2026-11-22T04:12:02+0000, git 1b1c995, <machine key>" for headers.
std::string describe_run(const nlohmann::json& doc);

std::string fmt_change(double ratio);  // 1.052 -> "+5.2%"

}  // namespace dlb::harness
