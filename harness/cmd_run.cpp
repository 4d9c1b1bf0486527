// `dlbench run` and `dlbench list`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>

#include "bench/case.h"
#include "harness/commands.h"
#include "kernels/common/errors.h"
#include "harness/dist.h"
#include "harness/runner.h"
#include "harness/sweep.h"
#include "harness/tables.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

namespace {
struct RunFlags {
  std::string suite = "lecture", device = "all", out, sizes, batch, images, dtype, filter, input, peer;
  std::string repetitions, min_time, ranks;
  bool quick = false, no_report = false, list = false, cuda_graph = false, profile = false, no_interleave = false;
  std::string seed;
  std::set<std::string> given;  // the flags given on the command line (an empty value counts)
};

// The options of `sub` that were given, by their long name.
std::set<std::string> given_flags(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0 && !o->get_lnames().empty()) out.insert("--" + o->get_lnames().front());
  return out;
}

// A flag that a chosen suite does not use is refused, naming the suite (a silently ignored --sizes
// runs a different sweep than the one asked for).
void check_flags_for_suites(const RunFlags& f, const std::vector<std::string>& suites) {
  for (const char* flag : {"--sizes", "--batch", "--images", "--dtype", "--input", "--cuda-graph", "--peer", "--profile"}) {
    if (!f.given.count(flag)) continue;
    for (const auto& s : suites) {
      const auto uses = suite_flags(s);
      if (uses.empty() || std::find(uses.begin(), uses.end(), flag) != uses.end()) continue;
      std::string list;
      for (const auto& u : uses) list += (list.empty() ? "" : ", ") + u;
      throw UsageError(std::string(flag) + ": suite " + s + " does not use it (its flags: " + list + ")");
    }
  }
}

void add_common(CLI::App* sub, RunFlags& f) {
  sub->add_option("--suite,-s", f.suite, "Suite(s), comma-separated, or 'all' (default: lecture)");
  sub->add_option("--device,-d", f.device, "cpu | cuda | cuda:N | all, comma-separated (default: all)");
  sub->add_flag("--quick,-q", f.quick, "CI scale: small sweeps, fewer repetitions");
  sub->add_option("--sizes", f.sizes, "Override the size axis, e.g. 512,2048 (transfer: 1MB,256KiB)");
  sub->add_option("--batch", f.batch, "Override the batch axis, e.g. 64,4,2");
  sub->add_option("--images", f.images, "Training suites: images per timed epoch (default 50000, --quick 1024)");
  sub->add_option("--dtype", f.dtype, "Restrict dtypes: fp32,tf32,fp16,bf16");
  sub->add_option("--filter", f.filter, "Only cases whose name matches this regular expression");
  sub->add_option("--input", f.input, "Training input pipeline: pageable | pinned | prefetch | resident | all");
  sub->add_flag("--cuda-graph", f.cuda_graph, "Capture the GPU training step in a CUDA graph");
  sub->add_flag("--profile", f.profile,
                "Training suites: after timing, one more step per case recorded per layer (traces/<case>.json)");
  sub->add_option("--peer", f.peer, "Also run a peer implementation (pytorch) and print it beside ours");
}

RunOptions to_options(const RunFlags& f, const std::vector<std::string>& argv) {
  RunOptions o;
  if (f.suite == "all") {
    o.suites.clear();
    for (const auto& s : bench::all_suites()) o.suites.push_back(s.name);
  } else {
    o.suites = parse_words(f.suite, "--suite");
    if (o.suites.size() > 1 && std::find(o.suites.begin(), o.suites.end(), "all") != o.suites.end())
      throw UsageError("--suite '" + f.suite + "': 'all' already holds every suite");
  }
  check_flags_for_suites(f, o.suites);
  o.device = f.device;
  o.quick = f.quick;
  if (f.given.count("--repetitions")) o.repetitions = static_cast<int>(parse_int(f.repetitions, "--repetitions", 1, 1000));
  if (f.given.count("--min-time")) o.min_time = parse_real(f.min_time, "--min-time", 1e-6, 3600.0);
  if (f.given.count("--filter") && f.filter.empty()) throw UsageError("--filter: empty regular expression");
  if (f.given.count("--out") && f.out.empty()) throw UsageError("--out: empty folder name");
  o.out = f.out;
  o.filter = f.filter;
  o.report = !f.no_report;
  o.list_only = f.list;
  o.argv = argv;
  const bool units = o.suites.size() == 1 && o.suites[0] == "transfer";
  const bool dist = o.suites.size() == 1 && o.suites[0] == "dist";
  if (f.given.count("--sizes")) {
    o.overrides["size"] = dist ? parse_size_sweep(f.sizes) : parse_list(f.sizes, "--sizes", units);
    o.extra["sizes_given"] = true;  // suites with extra shapes beside the size axis run only these
  }
  if (f.given.count("--batch")) o.overrides["batch"] = parse_list(f.batch, "--batch", false, 1 << 20);
  if (f.given.count("--images")) o.overrides["images"] = parse_list(f.images, "--images", false, 100000000);
  if (f.given.count("--dtype")) {
    auto words = parse_words(f.dtype, "--dtype");
    for (const auto& w : words) {
      try {
        parse_dtype(w);
      } catch (const UsageError& e) {
        throw UsageError(std::string("--dtype: ") + e.what());
      }
    }
    o.overrides["dtype"] = words;
  }
  if (f.given.count("--input")) {
    const auto words = parse_words(f.input, "--input");
    for (const auto& w : words)
      if (w != "pageable" && w != "pinned" && w != "prefetch" && w != "resident" && w != "all")
        throw UsageError("--input '" + w + "': unknown mode (expected pageable, pinned, prefetch, resident or all)");
    if (words.size() > 1 && std::find(words.begin(), words.end(), "all") != words.end())
      throw UsageError("--input '" + f.input + "': 'all' already holds every mode");
    o.extra["input"] = words;
  }
  if (f.cuda_graph) o.extra["cuda_graph"] = true;
  if (f.profile) o.extra["profile"] = true;
  if (f.given.count("--peer")) {
    if (f.peer != "pytorch") throw UsageError("--peer '" + f.peer + "': unknown peer (expected pytorch)");
    o.extra["peer"] = f.peer;
  }
  return o;
}
}  // namespace

void add_run_command(CLI::App& app, int& rc) {
  auto argv = std::make_shared<std::vector<std::string>>();
  auto f = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run suites: verify every case, time it, write results and tables");
  add_common(run, *f);
  run->add_option("--repetitions,-r", f->repetitions, "Repetitions per case, 1..1000 (default 5)");
  run->add_option("--min-time", f->min_time, "Minimum seconds per repetition, 1e-6..3600 (default 0.1, --quick 0.02)");
  auto* out = run->add_option("--out,-o", f->out, "Results folder (default results/<timestamp>-<host>); one that holds results is refused");
  auto resume = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* res = run->add_option("--resume", *resume, "Finish the interrupted run in DIR: its finished cases are kept (same flags, or none)");
  auto* frc = run->add_flag("--force", *force, "Replace the results already in --out");
  res->excludes(out)->excludes(frc);
  run->add_flag("--no-interleave", f->no_interleave,
                "Time each case's repetitions back to back (default: cases set up together, timed in shuffled rounds)");
  auto* seed = run->add_option("--seed", f->seed, "Seed of the rounds' shuffle, 0..2^64-1 (default: random; recorded in the results)");
  run->add_flag("--no-report", f->no_report, "Do not write the HTML report at the end");
  run->add_flag("--list", f->list, "Print the cases that would run, and run nothing");
  run->add_option("--ranks", f->ranks, "Suite dist: run N ranks, 1..1024 (re-launches itself under mpirun)");
  run->callback([f, run, resume, force, seed, &rc] {
    f->given = given_flags(run);
    if (!f->no_report) check_python_runs_report();  // before hours of cases, not after
    else if (f->given.count("--peer")) check_python_env();
    std::vector<std::string> args = {"dlbench", "run"};
    RunOptions o = to_options(*f, args);
    o.interleave = !f->no_interleave;
    o.seed_given = seed->count() > 0;
    if (o.seed_given) {
      const std::string& v = f->seed;
      errno = 0;
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || *end || errno == ERANGE)
        throw UsageError("--seed '" + v + "': expected a whole number from 0 to 18446744073709551615");
      o.seed = n;
    }
    if (*force) o.out_mode = OutMode::force;
    if (!resume->empty()) {
      o.out_mode = OutMode::resume;
      o.out = *resume;
      // No flag that shapes the case set or the timing: take the interrupted run's own.
      o.stored_options = true;
      for (const char* flag : {"--suite", "--device", "--quick", "--sizes", "--batch", "--images", "--dtype", "--filter",
                               "--input", "--cuda-graph", "--peer", "--repetitions", "--min-time", "--no-interleave"})
        if (run->count(flag) > 0) o.stored_options = false;
    } else if (run->count("--resume") > 0) {
      throw UsageError("--resume: expected a results folder");
    }
    const bool dist = std::find(o.suites.begin(), o.suites.end(), "dist") != o.suites.end();
    const int ranks = f->given.count("--ranks") ? static_cast<int>(parse_int(f->ranks, "--ranks", 1, 1024)) : 0;
    if (ranks != 0 && !dist) throw UsageError("--ranks: only suite dist runs across ranks (add --suite dist)");
    if (dist && o.out_mode == OutMode::resume) throw UsageError("--resume: suite dist runs are not resumable; run it again");
    rc = dist ? run_distributed(o, ranks) : run_suites(o);
  });

  auto lf = std::make_shared<RunFlags>();
  lf->suite = "";
  CLI::App* list = app.add_subcommand("list", "List the suites, or the cases one would run (--suite ...)");
  add_common(list, *lf);
  list->callback([lf, list, &rc] {
    lf->given = given_flags(list);
    if (!lf->given.count("--suite")) {
      for (const auto& flag : lf->given)
        throw UsageError("list " + flag + ": give --suite too (without it, list prints the suites)");
      std::vector<std::vector<std::string>> rows;
      for (const auto& s : bench::all_suites()) rows.push_back({s.name, s.description});
      print_table(std::cout, {"Suite", "What it measures"}, rows);
      rc = 0;
      return;
    }
    RunFlags copy = *lf;
    copy.list = true;
    rc = run_suites(to_options(copy, {"dlbench", "list"}));
  });
}

}  // namespace dlb::harness
