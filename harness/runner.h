// The run loop: expand suites into cases, then per case set up -> verify -> time with Google
// Benchmark (warm-up, repetitions, more repetitions when noisy) -> append the record at once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/records.h"
#include "harness/results.h"

namespace dlb::bench {
struct CaseSpec;
}

namespace dlb::harness {

struct RunOptions {
  std::vector<std::string> suites = {"lecture"};
  std::string device = "all";        // cpu | cuda | cuda:N | all
  bool quick = false;
  int repetitions = 0;               // 0: 5 (also with --quick: 3 vs 3 can never be significant)
  double min_time = 0;               // seconds per repetition; 0: 0.1, or 0.02 with --quick
  double max_cv = 0.05;              // above this coefficient of variation, repetitions are doubled once
  std::string out;                   // results folder; "" = results/<timestamp>-<host>
  nlohmann::json overrides = nlohmann::json::object();  // axis overrides from flags
  nlohmann::json extra = nlohmann::json::object();      // free-form suite flags
  std::string filter;                // regex on case names
  bool report = true;                // write the HTML report at the end
  bool list_only = false;            // print the cases, run nothing
  std::vector<std::string> argv;
  OutMode out_mode = OutMode::fresh;  // --force: replace; --resume: add the missing cases
  bool stored_options = false;        // --resume with no suite flags: take the interrupted run's
  bool interleave = true;             // --no-interleave: time each case's repetitions back to back
  bool seed_given = false;            // --seed: the interleaving's shuffle seed (else a random one)
  std::uint64_t seed = 0;
};

// The options a run is resumed by (stored in the results.jsonl header): what decides its case set
// and how the cases are timed.
nlohmann::json options_json(const RunOptions& o, const std::vector<std::string>& devices);

// "cpu" | "cuda" | "cuda:N" | "all" -> the devices that exist. UsageError for unknown or absent ones
// (except "all", which quietly means cpu when there is no GPU).
std::vector<std::string> resolve_devices(const std::string& spec, std::string* note = nullptr);

// Default results folder: results/<YYYYmmdd-HHMMSS>-<host>.
std::string default_out_dir();

// How a case is timed: Google Benchmark repetitions of at least min_time seconds each; a first pass
// whose coefficient of variation exceeds max_cv is redone once with twice the repetitions.
struct TimingPolicy {
  int repetitions = 5;
  bool repetitions_given = false;  // the user's --repetitions beats Case::repetitions()
  double min_time = 0.1;
  double max_cv = 0.05;
  bool retry_noisy = true;
  std::string trace_dir;  // --profile: the results folder (traces go to its traces/); "" = no profiling
  // Interleaved timing (run_window): cases per window, and the most host memory (resident growth) the
  // window's set-up cases may hold together.
  int window = 16;
  double window_bytes = 4e9;
  // Tiny cases: a case whose single iteration takes under tiny_below_s gets at least tiny_min_time
  // seconds per repetition (0: off; on when the user gave no --min-time).
  double tiny_min_time = 0;
  double tiny_below_s = 1e-3;
};

// One case end to end: make, set up, verify (a failure is recorded and never timed), time, build its
// entries (per repetition + aggregates, or one failure entry). `record` receives the case's summary
// entry (its median). Never throws for a case's own failure (out of memory, unsupported, errors).
std::vector<nlohmann::json> run_case(const bench::CaseSpec& spec, std::size_t index, const TimingPolicy& policy,
                                     const Peaks& peaks, nlohmann::json& record);

// The timing policy `run` uses for these options (every rank of a dist run must use the same).
TimingPolicy timing_policy(const RunOptions& opts);
// Interleaved timing (Google Benchmark's random interleaving, driven here): the cases of `window`
// (spec, sweep index) are made, set up and verified one after another -- up to policy.window of them,
// fewer when their resident memory grows past policy.window_bytes, or when one runs out of memory
// beside the others (it is left for the next window) -- and only then timed, in rounds: each round
// runs one repetition (a one-repetition Google Benchmark run; after the first, with the first one's
// iteration count) of every case still wanting one, in an order shuffled by std::mt19937_64(seed).
// A case whose cv exceeds max_cv gets extra rounds (up to twice its repetitions, at most 20). Entries
// are shaped as run_case's: per-repetition iterations, then mean, median, stddev, cv aggregates.
struct WindowCase {
  std::vector<nlohmann::json> entries;
  nlohmann::json record;
};
struct WindowResult {
  std::vector<WindowCase> cases;   // one per case consumed, in the window's order (a prefix of `window`)
  bool interrupted = false;        // a signal came: nothing of this window is a result
  int rounds = 0;                  // rounds run, extra ones included
};
WindowResult run_window(const std::vector<std::pair<const bench::CaseSpec*, std::size_t>>& window,
                        const TimingPolicy& policy, const Peaks& peaks, std::uint64_t seed,
                        std::vector<std::size_t>* timing_order = nullptr);

// Returns the exit code: 0, 1 if any case failed verification, 130 if interrupted (SIGINT, SIGTERM,
// SIGHUP: the current case finishes or, when it runs a child process, is abandoned and not recorded).
int run_suites(const RunOptions& opts);

}  // namespace dlb::harness
