// Run comparison for `dlbench compare`, `baseline check` and `history`: cases of two results files
// matched by run_name, per case the median change, a Mann-Whitney U test over the repetitions and
// the run's own noise band, then a verdict.
//
// Verdicts (thr = --threshold, a = --alpha, change = median NEW / median BASE - 1, noise = the larger
// cv of the two sides' repetitions, busy = the larger share of the CPUs other processes used while
// either side was timed, "foreign_cpu" in the records):
//   busy > --max-busy (10%) on either side, |change| > thr: the machine was shared, and repetitions in
//           one process cannot tell load from a slower case (on 2 busy cores back-to-back A/A runs
//           differ by +30..+800%). The load both sides recorded is common-mode; what it can explain is
//           the difference in CPU share left to the case, L = (1 - lighter) / (1 - heavier) (an
//           unknown side counts as 0%). Checked first:
//     SLOWER  every NEW repetition slower than every BASE one by more than L x (1 + thr + noise)
//             (3+ repetitions a side), or the median change beyond L x (1 + thr + noise) with
//             p < a; and beyond the noise floor -> a regression (exit 1)
//     FASTER  the same, the other way
//     NOISY   otherwise
//   SLOWER  change > +thr and p < a, or (3+ repetitions a side) every NEW repetition is slower than
//           every BASE repetition by more than thr + noise (a clean shift that few repetitions
//           cannot make significant, e.g. 2x at 3 vs 3)  -> a regression (exit 1)
//   FASTER  the same, the other way
//   NOISY   |change| > thr but neither of the above (the repetitions cannot confirm it), or the noise
//           band is wider than thr, so SAME can't be trusted
//   SAME    otherwise
//   NEW     timed in NEW, absent (or failed / skipped) in BASE
//   GONE    timed in BASE, absent or skipped in NEW (a GPU case on a CPU-only runner); also a case
//           out of memory in NEW that was never timed in BASE either
//   FAILED  failed in NEW (verification or an error), or out of memory in NEW after being timed
//           in BASE -> exit 1
// Cases skipped in both runs are left out of the table and counted.
// Outcome (the last line printed and the exit code of compare / baseline check): REGRESSION (1) when a
// case is SLOWER or FAILED; otherwise INCONCLUSIVE (3) when any case is NOISY; otherwise
// "no regression" (0).
#pragma once
#include <cstddef>
#include <iosfwd>
#include <limits>
#include <map>
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
  // Largest share (0..1) of the CPUs other processes used while the case was timed; NaN: unknown.
  double foreign_cpu = std::numeric_limits<double>::quiet_NaN();
};

// A time in Google Benchmark's time_unit (ns, us, ms, s; none: us) in microseconds; InputError naming
// `where` for another unit.
double to_us(double t, const std::string& unit, const std::string& where);

// The case an entry belongs to: run_name, else name less an aggregate's "_median" suffix; "" if none.
std::string entry_case_name(const nlohmann::json& entry);

// The cases of a loaded results document (load_results), in file order. `label` names the source in
// errors: an entry that is not an object, a timed entry without a numeric time, or a case name that
// appears twice (a repetition_index or aggregate seen again, or more repetitions than its entries
// declare: two cases of one name, never merged into one sample) -> InputError.
std::vector<CaseRun> extract_cases(const nlohmann::json& doc, const std::string& label,
                                   TimeField field = TimeField::real);

enum class Verdict { faster, slower, same, noisy, added, gone, failed };
const char* verdict_name(Verdict v);  // "FASTER", "SLOWER", "SAME", "NOISY", "NEW", "GONE", "FAILED"

struct CompareOptions {
  double threshold = 0.05;  // relative change of the median that matters
  double alpha = 0.05;      // significance level of the Mann-Whitney test
  double max_busy = 0.10;   // above this foreign CPU share on either side a change is NOISY, not judged
  TimeField time = TimeField::real;
  // Between-run noise floor (--noise-floor): a change within it is NOISY, never SLOWER or FASTER.
  // noise_floor applies to every case; case_floors (learned from earlier runs, learned_floors) to
  // the cases they name, and win over it.
  double noise_floor = 0;
  std::map<std::string, double> case_floors;
  std::size_t floor_runs = 0;  // how many runs case_floors were learned from (0: none)
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
  double busy = std::numeric_limits<double>::quiet_NaN();     // max(foreign_cpu BASE, NEW); NaN: unknown
  bool separated = false;                                     // every NEW repetition beyond every BASE one by thr + noise
  bool fatal = false;                                         // counts toward exit 1
  double floor = 0;                                           // the between-run noise floor applied (0: none)
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
  // Cases left NOISY: nothing can be said of them. Without a regression, compare exits 3 on them
  // (never "no regression"), with inconclusive_line() on stderr.
  std::size_t inconclusive() const;
  std::string inconclusive_line() const;
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
// "10%" or "0.1" in [0, 1] (a share of the CPUs; 100% turns the check off) -> UsageError otherwise.
double parse_max_busy(const std::string& text, const std::string& flag = "--max-busy");
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
