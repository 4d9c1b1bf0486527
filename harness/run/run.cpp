// `dlbench run` (see run.h): the loop over windows, results written as each window finishes.
#include "harness/run/run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "bench/suite.h"
#include "harness/commands.h"
#include "harness/dist.h"
#include "harness/fingerprint.h"
#include "harness/resume.h"
#include "harness/run/context.h"
#include "harness/run/plan.h"
#include "harness/run/progress.h"
#include "harness/sweep.h"
#include "kernels/common/child.h"
#include "kernels/common/device.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

using json = nlohmann::json;

std::vector<std::string> resolve_devices(const std::string& spec, std::string* note) {
  const CudaInfo& cu = cuda_info();
  std::vector<std::string> out;
  auto add = [&](const std::string& d) {  // a device named twice (cpu,all; cuda,cuda:0) is a usage error
    for (const auto& x : out)
      if (x == d) throw UsageError("--device '" + spec + "': " + d + " is listed twice");
    out.push_back(d);
  };
  for (const std::string& d : parse_words(spec, "--device")) {
    if (d == "cpu") {
      add("cpu");
    } else if (d == "all") {
      add("cpu");
      for (const auto& g : cu.gpus) add("cuda:" + std::to_string(g.index));
      if (!cu.available && note) *note = "GPU cases skipped: " + cu.reason;
    } else if (d == "cuda" || d == "gpu") {
      if (!cu.available) throw UsageError("--device " + d + ": " + cu.reason);
      for (const auto& g : cu.gpus) add("cuda:" + std::to_string(g.index));
    } else if (d.rfind("cuda:", 0) == 0) {
      const std::string n = d.substr(5);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
        throw UsageError("--device '" + d + "': expected cuda:N with N a GPU index");
      if (!cu.available) throw UsageError("--device " + d + ": " + cu.reason);
      const int idx = std::stoi(n);
      if (idx >= static_cast<int>(cu.gpus.size()))
        throw UsageError("--device " + d + ": there are " + std::to_string(cu.gpus.size()) + " CUDA device(s)");
      add(d);
    } else {
      throw UsageError("--device '" + d + "': unknown device (expected cpu, cuda, cuda:N or all)");
    }
  }
  return out;
}

json options_json(const RunOptions& o, const std::vector<std::string>& devices) {
  return {{"suites", o.suites},           {"devices", devices},   {"quick", o.quick},
          {"repetitions", o.repetitions}, {"min_time", o.min_time}, {"max_cv", o.max_cv},
          {"filter", o.filter},           {"overrides", o.overrides}, {"extra", o.extra},
          {"interleave", o.interleave}};
}

TimingPolicy timing_policy(const RunOptions& opts) {
  TimingPolicy p;
  p.repetitions = opts.repetitions > 0 ? opts.repetitions : timing::kRepetitions;
  p.repetitions_given = opts.repetitions > 0;
  p.min_time = opts.min_time > 0 ? opts.min_time : (opts.quick ? timing::kMinTimeQuick : timing::kMinTime);
  p.max_cv = opts.max_cv;
  p.retry_noisy = !opts.quick;
  if (opts.min_time <= 0) p.tiny_min_time = opts.quick ? timing::kTinyMinTimeQuick : timing::kTinyMinTime;
  return p;
}

namespace {

bool is_failure(const json& r) {
  return r.value("error_occurred", false) && !r.contains("skipped") && r.value("error", "") != "out of memory";
}

// Cross-case keys (bench::Suite::derive) over every entry of each suite with new entries in `fresh`,
// before `fresh` is appended: results.jsonl gets them as known then, results.json all of them.
void derive_keys(const Plan& plan, ResultsWriter& writer, std::vector<json>& fresh) {
  std::set<const bench::Suite*> suites;
  for (const auto& [s, c] : plan.cases)
    if (s->derive) suites.insert(s);
  for (const bench::Suite* s : suites) {
    std::vector<json*> refs;
    for (auto* list : {&writer.entries(), &fresh})
      for (auto& e : *list)
        if (e.value("suite", "") == s->name) refs.push_back(&e);
    std::vector<json> all;
    for (const json* e : refs) all.push_back(*e);
    s->derive(all);
    for (std::size_t k = 0; k < refs.size(); ++k) *refs[k] = std::move(all[k]);
  }
}

// The interleaved windows' memory bound: kWindowBytes, at most a share of the memory free now.
double window_bytes() {
  double b = timing::kWindowBytes;
  if (const long pages = sysconf(_SC_AVPHYS_PAGES); pages > 0)
    b = std::min(b, timing::kWindowFreeShare * static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE)));
  return b;
}

}  // namespace

int run_suites(const RunOptions& given) {
  RunOptions opts = given;
  std::unique_ptr<InterruptScope> interrupt_scope;  // SIGINT, SIGTERM, SIGHUP: finish or abandon, write, exit 130
  if (!opts.list_only)
    interrupt_scope = std::make_unique<InterruptScope>(
        "\ndlbench: interrupted -- finishing the current case, then writing results (again to quit now)\n");
  // --resume: the folder is locked and read back first (its header may supply the options).
  std::unique_ptr<ResultsWriter> writer;
  if (opts.out_mode == OutMode::resume && !opts.list_only) {
    writer = std::make_unique<ResultsWriter>(opts.out, OutMode::resume);
    if (opts.stored_options && !writer->stored_header().is_object())
      throw UsageError("--resume " + opts.out + ": that run died before it recorded its options; give its flags with --resume");
    if (opts.stored_options) apply_stored_options(opts, writer->stored_header().value("options", json()), opts.out);
  }
  // 1. Plan: everything that can be wrong with the input is checked before anything runs.
  const Plan plan = plan_run(opts);
  if (!plan.device_note.empty()) std::cerr << "dlbench: " << plan.device_note << "\n";
  if (opts.list_only) {
    for (const auto& n : plan.names) std::cout << n << "\n";
    return 0;
  }
  // Back to back, not interleaved: a profiled step belongs to its case's own timing (one case set up
  // at a time, its memory and energy its own), and a suite across ranks runs its cases in lockstep
  // (the other ranks follow case by case, harness/dist.cpp).
  if (opts.extra.value("profile", false) || plan.distributed) opts.interleave = false;
  if (!writer) writer = std::make_unique<ResultsWriter>(opts.out, opts.out_mode);
  const bool resuming = opts.out_mode == OutMode::resume && writer->stored_header().is_object();
  const std::map<std::string, json> kept = resuming ? check_resume(*writer, opts, plan) : std::map<std::string, json>{};

  TimingPolicy policy = timing_policy(opts);
  if (opts.extra.value("profile", false)) policy.trace_dir = writer->dir();
  // The rounds' shuffle seed: --seed, else a resumed run's own, else a random one (all recorded).
  std::uint64_t seed = opts.seed_given ? opts.seed : std::random_device{}();
  if (const json& h = writer->stored_header(); !opts.seed_given && resuming && h.contains("seed") && h["seed"].is_number_unsigned())
    seed = h["seed"].get<std::uint64_t>();
  const Ordering ordering =
      opts.interleave ? Ordering::interleaved(seed, timing::kWindowCases, window_bytes()) : Ordering::back_to_back();

  // 2. Context: fingerprint + measured peaks.
  json context = fingerprint(opts.argv);
  if (resuming) check_same(writer->stored_header().value("machine", json()), machine_json(context), "machine", writer->dir());
  else writer->write_header(run_header(opts, plan, context, seed));
  json stored_peaks;  // resume: the interrupted run measured them already
  if (resuming) {
    try {
      const json prev = load_results(writer->dir() + "/results.json");
      if (prev.at("context").contains("peaks")) stored_peaks = prev.at("context").at("peaks");
    } catch (const std::exception&) {
    }
  }
  const Peaks peaks = measure_peaks(plan, stored_peaks, context);
  if (plan.distributed) context["dist"] = dist_context();
  context["run"] = run_section(opts, plan, policy, ordering, resuming);
  writer->write_json(context);
  std::cerr << "dlbench: " << plan.cases.size() << " case(s) -> " << writer->dir();
  if (!kept.empty()) std::cerr << " (resuming: " << kept.size() << " already done)";
  std::cerr << "\n";

  // 3. The loop: windows of the ordering (interleaved: up to 16 cases; back to back: one).
  const auto t_start = std::chrono::steady_clock::now();
  const std::size_t n = plan.cases.size();
  Progress progress(n, kept.size());
  for (std::size_t i = 0; i < n;) {
    if (interrupt_requested()) break;
    if (kept.count(plan.names[i])) {
      ++i;
      continue;
    }
    std::vector<PlannedCase> window;  // the next cases not already done (measure may take fewer)
    for (std::size_t j = i; j < n && static_cast<int>(window.size()) < ordering.window; ++j)
      if (!kept.count(plan.names[j])) window.push_back({&plan.cases[j].second, j});
    if (ordering.window == 1) std::cerr << progress.prefix(i) << plan.names[i] << " " << std::flush;
    else
      std::cerr << progress.prefix(window.front().index) << "setting up and verifying up to " << window.size()
                << " case(s), then timing them interleaved\n";
    Ordering o = ordering;
    o.seed = seed + window.front().index;
    const WindowResult w = measure(window, policy, o, peaks);
    if (w.interrupted || w.cases.empty()) {
      std::cerr << (ordering.window == 1 ? "interrupted (not recorded)\n"
                                         : "dlbench: interrupted (this window's cases are not recorded; --resume runs them)\n");
      break;
    }
    std::vector<json> fresh;
    for (const auto& c : w.cases) fresh.insert(fresh.end(), c.entries.begin(), c.entries.end());
    derive_keys(plan, *writer, fresh);
    writer->append(fresh);  // the window's records at once (one write, synced)
    writer->write_json(context);
    for (std::size_t k = 0; k < w.cases.size(); ++k) {
      const std::size_t idx = window[k].index;
      if (ordering.window > 1) std::cerr << progress.prefix(idx) << plan.names[idx] << " ";
      progress.finished(w.cases[k].record, k + 1 == w.cases.size());  // the ETA once the window is done
    }
    i = window[w.cases.size() - 1].index + 1;  // past the last case the window took (kept ones are skipped above)
  }
  const bool interrupted = interrupt_requested();
  const auto done = records_by_case(writer->entries());
  std::size_t n_done = 0;
  int failed = 0;
  for (const auto& p : plan.names)
    if (auto it = done.find(p); it != done.end()) ++n_done, failed += is_failure(it->second);
  const bool all_done = n_done == plan.names.size();  // a signal during the last case still leaves a complete run
  context["run"]["interrupted"] = interrupted && !all_done;
  context["run"]["state"] = all_done ? "complete" : interrupted ? "interrupted" : "incomplete";
  context["run"]["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  writer->write_json(context);

  // 4. Tables: a generic one per suite, then the suite's own (the lecture layout, ...).
  std::vector<const bench::Suite*> order;
  std::vector<std::vector<json>> records;
  for (const auto& name : opts.suites) {
    order.push_back(&suite_named(name));
    records.emplace_back();
    for (const auto& [s, c] : plan.cases)
      if (s == order.back())
        if (auto it = done.find(c.id.name()); it != done.end()) records.back().push_back(it->second);
  }
  print_tables(std::cout, order, records);
  std::cout << "\nresults: " << writer->dir() << "/results.json (" << writer->entries().size() << " entries)\n";
  if (failed) std::cerr << "dlbench: " << failed << " case(s) failed\n";
  if (interrupted) {
    std::cerr << "dlbench: interrupted; results so far are in " << writer->dir() << "\n";
    return 130;
  }
  if (opts.report) {
    const std::string rep = writer->dir() + "/report";
    const int rc = generate_report({writer->dir()}, rep);
    if (rc == 0) std::cout << "report:  " << rep << "/index.html\n";
    if (rc == 130 || interrupt_requested()) return 130;
  }
  return failed ? 1 : 0;
}

}  // namespace dlb::harness
