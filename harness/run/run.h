// `dlbench run`: plan the cases (plan.h), record the context (context.h), time them window by
// window with the one engine (engine.h), write results as they finish, print tables (progress.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"
#include "harness/run/engine.h"

namespace dlb::harness {

struct RunOptions {
  std::vector<std::string> suites = {"lecture"};
  std::string device = "all";        // cpu | cuda | cuda:N | all
  bool quick = false;
  int repetitions = 0;               // 0: timing::kRepetitions
  double min_time = 0;               // seconds per repetition; 0: timing::kMinTime (kMinTimeQuick with --quick)
  double max_cv = timing::kMaxCv;    // above this coefficient of variation, repetitions grow once (kNoisyRetryFactor)
  std::string out;                   // results folder; "" = results/<timestamp>-<host>
  nlohmann::json overrides = nlohmann::json::object();  // axis -> values, from the suites' flags
  nlohmann::json extra = nlohmann::json::object();      // non-axis suite flags (cuda_graph, peer, profile)
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

// The timing policy `run` uses for these options (every rank of a dist run computes the same).
TimingPolicy timing_policy(const RunOptions& opts);

// Returns the exit code: 0, 1 if any case failed verification, 130 if interrupted (SIGINT, SIGTERM,
// SIGHUP: the current case or window finishes or is abandoned, engine.h's Ordering).
int run_suites(const RunOptions& opts);

}  // namespace dlb::harness
