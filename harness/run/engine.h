// The one timing engine. Over a window of cases, in order:
//   1. prepare: make, set up and verify every case (a failed check is recorded and never timed);
//   2. rounds: each round times one repetition (timer.h) of every case whose stopping rule
//      (stopping.h) still wants one, in the ordering's order, until none does;
//   3. entries: per repetition, then mean/median/stddev/cv (records.h), with the meters.
// Back to back is a window of one case, unshuffled; interleaved is a window of up to 16 cases in
// seeded shuffled rounds (Google Benchmark's random interleaving, as rounds).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/records.h"
#include "harness/run/constants.h"

namespace dlb::bench {
struct CaseSpec;
}

namespace dlb::harness {

// How each case is timed (the same on every rank of a dist run: timing_policy(), run.h).
struct TimingPolicy {
  int repetitions = timing::kRepetitions;
  bool repetitions_given = false;  // the user's --repetitions beats Case::repetitions()
  double min_time = timing::kMinTime;
  double max_cv = timing::kMaxCv;
  bool retry_noisy = true;
  // Tiny cases: an iteration under tiny_below_s gets repetitions of at least tiny_min_time (0: off).
  double tiny_min_time = 0;
  double tiny_below_s = timing::kTinyBelow;
  std::string trace_dir;  // --profile: the results folder (traces go to its traces/); "" = no profiling
};

// The order repetitions run in.
struct Ordering {
  int window = 1;                               // cases set up and timed together
  double window_bytes = timing::kWindowBytes;   // the most resident memory a window's set-up cases may add
  bool shuffle = false;                         // each round in an order shuffled by std::mt19937_64(seed)
  std::uint64_t seed = 0;
  // On an interrupt (SIGINT...): true finishes the window (a window of one: "finishing the current
  // case"; dist's ranks stay in lockstep); false abandons it, nothing of it recorded.
  bool finish_on_interrupt = true;

  static Ordering back_to_back() { return {}; }
  static Ordering interleaved(std::uint64_t seed, int window = timing::kWindowCases,
                              double window_bytes = timing::kWindowBytes) {
    return {window, window_bytes, true, seed, false};
  }
};

struct PlannedCase {
  const bench::CaseSpec* spec;
  std::size_t index;  // its place in the run's plan (family_index)
};

struct CaseResult {
  std::vector<nlohmann::json> entries;  // per repetition + aggregates, or one failure entry
  nlohmann::json record;                // the summary: the median entry, or the only one
};

struct WindowResult {
  std::vector<CaseResult> cases;  // one per case consumed, in order (a prefix of the window)
  bool interrupted = false;       // abandoned on a signal: nothing of this window is a result
  int rounds = 0;                 // rounds run, extra ones included
};

// Times `window` (see the top of this file): it takes cases while the ordering's window count and
// memory allow, and leaves a case that runs out of memory beside others for the next window. Never
// throws for a case's own failure (out of memory, unsupported, errors): those are its record.
// `timing_order`, when given, receives the plan index of each repetition as it runs.
WindowResult measure(const std::vector<PlannedCase>& window, const TimingPolicy& policy, const Ordering& ordering,
                     const Peaks& peaks, std::vector<std::size_t>* timing_order = nullptr);

// The FMA ceiling of a window from the probes before its rounds: the largest (a neighbour's burst
// only lowers a probe; a load that stays lowers them all). 0 without probes.
double window_cpu_ceiling(const std::vector<double>& probes);

// One case back to back: measure() over a window of one. Its entries; `record` gets its summary.
std::vector<nlohmann::json> run_case(const bench::CaseSpec& spec, std::size_t index, const TimingPolicy& policy,
                                     const Peaks& peaks, nlohmann::json& record);

}  // namespace dlb::harness
