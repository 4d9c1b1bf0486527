// `dlbench compare BASE NEW`, `dlbench baseline save|check RUN --dir DIR`, `dlbench history DIR`:
// regression tracking. Exit codes: 0 no regression; 1 a case significantly slower beyond the threshold
// or failed in NEW (with one line on stderr naming them); 2 bad usage or input (one line); 3 no
// regression found but some cases NOISY (inconclusive, one line naming them).
#include <CLI/CLI.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "harness/baseline.h"
#include "harness/commands.h"
#include "harness/compare.h"
#include "harness/dashboard.h"
#include "harness/history.h"
#include "harness/results.h"
#include "harness/sweep.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

void add_verdict_flags(CLI::App* sub, VerdictFlags& f) {
  sub->add_option("--threshold", f.threshold, "Change of the median that matters: 5% or 0.05")->capture_default_str();
  sub->add_option("--alpha", f.alpha, "Significance level of the Mann-Whitney U test")->capture_default_str();
  sub->add_option("--time", f.time, "Which time to compare: real (wall clock) or cpu (less sensitive to a loaded machine)")
      ->capture_default_str();
  sub->add_option("--max-busy", f.max_busy,
                  "Above this share of the CPUs used by other processes, a change is judged only when every repetition is apart "
                  "beyond what the recorded load and noise explain, else NOISY (100% turns it off)")
      ->capture_default_str();
  sub->add_option("--noise-floor", f.noise_floor,
                  "A change within this is NOISY, never SLOWER: 20%, or a folder of 3+ earlier runs of this machine "
                  "(history layout) from which each case's floor is learned (the spread of its medians)");
}

CompareOptions verdict_options(const VerdictFlags& f) {
  CompareOptions o;
  o.threshold = parse_threshold(f.threshold);
  o.alpha = parse_alpha(f.alpha);
  o.time = parse_time_field(f.time);
  o.max_busy = parse_max_busy(f.max_busy);
  if (!f.noise_floor.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(f.noise_floor, ec)) o.case_floors = learned_floors(f.noise_floor, o.time, &o.floor_runs);
    else {
      try {
        o.noise_floor = parse_threshold(f.noise_floor, "--noise-floor");
      } catch (const UsageError&) {
        throw UsageError("--noise-floor '" + f.noise_floor +
                         "': expected a percentage (20%), a fraction (0.2) or a folder of 3+ earlier runs");
      }
    }
  }
  return o;
}

namespace {

constexpr int kExitInconclusive = 3;  // README "Exit codes"

struct CompareFlags : VerdictFlags {
  bool json = false;
  bool allow_incomplete = false;
};

void add_compare_flags(CLI::App* sub, CompareFlags& f) {
  add_verdict_flags(sub, f);
  sub->add_flag("--json", f.json, "Print the comparison as JSON");
  sub->add_flag("--allow-incomplete", f.allow_incomplete,
                "Compare runs that did not finish (interrupted or killed) instead of failing (exit 1)");
}

// A run that did not finish all its planned cases is a failure (exit 1, one line naming it and how
// far it got) unless --allow-incomplete; then a note says so. Returns true when it was refused.
bool refuse_incomplete(const nlohmann::json& doc, const std::string& label, const CompareFlags& f, int& rc) {
  const RunState st = run_state(doc);
  if (st.complete()) return false;
  if (f.allow_incomplete) {
    std::cerr << "dlbench: note: " << label << " is an incomplete run (" << st.describe() << ")\n";
    return false;
  }
  std::cerr << "dlbench: error: " << label << ": incomplete run (" << st.describe()
            << "); finish it with dlbench run --resume, or pass --allow-incomplete\n";
  rc = 1;
  return true;
}

// --dir of baseline save/check: a folder, or a path that does not exist yet (save creates it); never a
// file, FIFO or device, and never empty.
void check_baseline_dir(const std::string& dir) {
  if (dir.empty()) throw UsageError("--dir: empty folder name");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw UsageError("--dir " + dir + ": not a folder (a baseline folder holds one folder per machine)");
}

// Prints the comparison; returns the exit code: 1 with one stderr line on a regression, 3 with one
// stderr line when cases stayed NOISY (inconclusive: a gate must not pass them as "no regression").
int report(const Comparison& c, bool as_json) {
  if (as_json) std::cout << comparison_json(c).dump(2) << "\n";
  else print_comparison(std::cout, c);
  std::cout.flush();
  if (c.regression()) {
    std::cerr << "dlbench: error: " << c.regression_line() << "\n";
    return 1;
  }
  if (c.inconclusive()) {
    std::cerr << "dlbench: error: " << c.inconclusive_line() << "\n";
    return kExitInconclusive;
  }
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, int& rc) {
  // compare
  {
    auto files = std::make_shared<std::vector<std::string>>();
    auto flags = std::make_shared<CompareFlags>();
    CLI::App* sub = app.add_subcommand("compare", "Compare two runs case by case: FASTER / SLOWER / SAME / NOISY / NEW / GONE / FAILED. "
                                                  "Exit 0 no regression, 1 a regression (SLOWER or FAILED), 2 bad input, "
                                                  "3 inconclusive (no regression found, but cases NOISY)");
    sub->add_option("runs", *files, "BASE NEW (results folders, results.json or results.jsonl)")->expected(2)->required();
    add_compare_flags(sub, *flags);
    sub->callback([files, flags, &rc] {
      const CompareOptions opts = verdict_options(*flags);
      const auto base = load_results(files->at(0));
      const auto neu = load_results(files->at(1));
      if (refuse_incomplete(base, files->at(0), *flags, rc) || refuse_incomplete(neu, files->at(1), *flags, rc)) return;
      rc = report(compare_runs(base, files->at(0), neu, files->at(1), opts), flags->json);
    });
  }

  // baseline save|check
  {
    CLI::App* bl = app.add_subcommand("baseline", "Baselines per machine (keyed by the fingerprint) in a folder you choose");
    bl->require_subcommand(1);

    auto save_run = std::make_shared<std::string>();
    auto save_dir = std::make_shared<std::string>();
    CLI::App* save = bl->add_subcommand("save", "Save RUN as the baseline of the machine it ran on: DIR/<machine>/results.json");
    save->add_option("run", *save_run, "Results folder or results.json")->required();
    save->add_option("--dir", *save_dir, "Folder of baselines")->required();
    auto save_incomplete = std::make_shared<bool>(false);
    save->add_flag("--allow-incomplete", *save_incomplete, "Save a run that did not finish all its cases");
    save->callback([save_run, save_dir, save_incomplete, &rc] {
      check_baseline_dir(*save_dir);
      const auto doc = load_results(*save_run);
      (void)extract_cases(doc, *save_run);  // a file no check could read (a case name twice) is no baseline
      if (!run_state(doc).complete() && !*save_incomplete)
        throw InputError(*save_run + ": incomplete run (" + run_state(doc).describe() +
                         "), not saved as a baseline; pass --allow-incomplete to save it anyway");
      const std::string key = baseline_key(doc, *save_run);
      std::string replaced;
      const std::string folder = save_baseline(doc, key, *save_dir, &replaced);
      std::cout << "saved the baseline for " << key << "\n  in " << folder << "\n";
      if (!replaced.empty()) std::cout << "  replacing the one from " << replaced << "\n";
      rc = 0;
    });

    auto check_run = std::make_shared<std::string>();
    auto check_dir = std::make_shared<std::string>();
    auto flags = std::make_shared<CompareFlags>();
    auto require = std::make_shared<bool>(false);
    auto save_missing = std::make_shared<bool>(false);
    CLI::App* check = bl->add_subcommand("check", "Compare RUN with the baseline of its machine (exit 1 on a regression, "
                                                   "3 when inconclusive: cases NOISY)");
    check->add_option("run", *check_run, "Results folder or results.json")->required();
    check->add_option("--dir", *check_dir, "Folder of baselines")->required();
    add_compare_flags(check, *flags);
    check->add_flag("--require", *require, "No baseline for this machine is an error (exit 2) instead of a note");
    check->add_flag("--save-missing", *save_missing, "No baseline for this machine: save RUN as its baseline");
    check->callback([check_run, check_dir, flags, require, save_missing, &rc] {
      const CompareOptions opts = verdict_options(*flags);
      if (*require && *save_missing) throw UsageError("baseline check: --require and --save-missing contradict each other");
      check_baseline_dir(*check_dir);
      const auto doc = load_results(*check_run);
      (void)extract_cases(doc, *check_run, opts.time);  // bad cases (a name twice): exit 2, baseline or not
      if (refuse_incomplete(doc, *check_run, *flags, rc)) return;
      const std::string key = baseline_key(doc, *check_run);
      const auto found = find_baseline(*check_dir, key);
      if (!found) {
        const std::string nearest = nearest_baseline_difference(*check_dir, key);
        if (*require)
          throw InputError("no baseline for this machine: " + key + " (in " + *check_dir + ")" +
                           (nearest.empty() ? "" : "; nearest: " + nearest));
        std::string saved;
        if (*save_missing) saved = save_baseline(doc, key, *check_dir);
        if (flags->json) {
          std::cout << nlohmann::json{{"baseline", nullptr}, {"machine", key}, {"nearest", nearest}, {"saved", saved}, {"regression", false}}.dump(2)
                    << "\n";
        } else {
          std::cout << "no baseline for this machine: " << key << "\n";
          if (!nearest.empty()) std::cout << "  nearest baseline: " << nearest << "\n";
          if (!saved.empty()) std::cout << "saved this run as its baseline: " << saved << "\n";
          else std::cout << "(save one with: dlbench baseline save " << *check_run << " --dir " << *check_dir << ")\n";
        }
        rc = 0;
        return;
      }
      const std::string base_file = *found + "/results.json";
      const auto base = load_results(base_file);
      if (refuse_incomplete(base, base_file, *flags, rc)) return;
      if (!flags->json) std::cout << "baseline for this machine: " << *found << "\n";
      rc = report(compare_runs(base, base_file, doc, *check_run, opts), flags->json);
    });
  }

  // history
  {
    auto dir = std::make_shared<std::string>();
    auto threshold = std::make_shared<std::string>("5%");
    auto time = std::make_shared<std::string>("real");
    auto min_segment = std::make_shared<std::string>("3");
    auto as_json = std::make_shared<bool>(false);
    auto html = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("history", "Trend over many runs of one machine, with a step flag for sustained shifts; "
                                                  "--html: a dashboard of every machine's runs");
    sub->add_option("dir", *dir, "Folder holding one results folder per run")->required();
    sub->add_option("--threshold", *threshold, "Smallest shift flagged as a step: 5% or 0.05")->capture_default_str();
    sub->add_option("--min-segment", *min_segment, "Runs on each side of a step")->capture_default_str();
    sub->add_option("--time", *time, "real or cpu")->capture_default_str();
    sub->add_flag("--json", *as_json, "Print the history as JSON");
    sub->add_option("--html", *html, "Write a static dashboard of every machine's history to this folder (OUT/index.html)");
    sub->callback([dir, threshold, time, min_segment, as_json, html, &rc] {
      HistoryOptions o;
      o.threshold = parse_threshold(*threshold);
      o.time = parse_time_field(*time);
      o.min_segment = static_cast<std::size_t>(parse_int(*min_segment, "--min-segment", 1, 1000));
      if (!html->empty()) {
        const DashboardSummary d = write_dashboard(*dir, o, *html);
        std::cout << "dashboard: " << *html << "/index.html (" << d.runs << " runs of " << d.machines << " machine(s), " << d.cases
                  << " cases, " << d.regressions << " current regression(s))\n";
        rc = 0;
        return;
      }
      const History h = load_history(*dir, o);
      if (*as_json) std::cout << history_json(h).dump(2) << "\n";
      else print_history(std::cout, h, o);
      rc = 0;
    });
  }
}

}  // namespace dlb::harness
