// The run loop (see runner.h): setup, verification, timing (Google Benchmark's loop, one repetition
// at a time when interleaved), progress and the interrupt policy. The entries are built in records.cpp.
#include "harness/runner.h"
#include "harness/dist.h"

#include <unistd.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>

#include "bench/case.h"
#include "harness/commands.h"
#include "harness/cpu_load.h"
#include "harness/fingerprint.h"
#include "harness/gpu_peaks.h"
#include "harness/meters.h"
#include "harness/results.h"
#include "harness/resume.h"
#include "harness/sweep.h"
#include "harness/tables.h"
#include "kernels/common/child.h"
#include "kernels/common/device.h"
#include "kernels/common/gpu_probe.h"
#include "kernels/common/nvtx.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/peak.h"

namespace dlb::harness {

using json = nlohmann::json;
using bench::Case;
using bench::CaseSpec;

namespace {

class Collector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override { runs_.insert(runs_.end(), runs.begin(), runs.end()); }
  std::vector<Run> runs_;
};

double cv_of_iterations(const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  double s = 0, s2 = 0;
  int n = 0;
  for (const auto& r : runs) {
    if (r.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration || r.error_occurred) continue;
    const double t = r.GetAdjustedRealTime();
    s += t, s2 += t * t, ++n;
  }
  if (n < 2 || s <= 0) return 0;
  const double mean = s / n, var = std::max(0.0, (s2 - n * mean * mean) / (n - 1));
  return std::sqrt(var) / mean;
}

std::string progress_prefix(std::size_t i, std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "[%*zu/%zu] ", static_cast<int>(std::to_string(n).size()), i + 1, n);
  return buf;
}

std::string eta(double elapsed, std::size_t done, std::size_t total) {
  if (done == 0 || done >= total) return "";
  const double left = elapsed / done * (total - done);
  char buf[48];
  if (left < 90) std::snprintf(buf, sizeof buf, "  eta %.0fs", left);
  else std::snprintf(buf, sizeof buf, "  eta %.0fm%02.0fs", std::floor(left / 60), std::fmod(left, 60));
  return buf;
}

}  // namespace

namespace {

using Run = benchmark::BenchmarkReporter::Run;

// One Google Benchmark run of `reps` repetitions of c->run(): a fixed iteration count when iters > 0,
// else as many as fill min_time; warm-up first when warmup > 0.
std::vector<Run> gb_time(Case* cp, const std::string& fn, int reps, double min_time, long iters, double warmup) {
  Collector col;
  const bool manual = cp->manual_time();
  auto* b = benchmark::RegisterBenchmark(fn.c_str(), [cp, manual](benchmark::State& st) {
    for (auto _ : st) {
      try {
        const double s = cp->run();
        if (manual) st.SetIterationTime(s);
      } catch (const std::bad_alloc&) {
        st.SkipWithError("out of memory: a host allocation failed");
        break;
      } catch (const std::exception& e) {
        st.SkipWithError(e.what());  // OutOfMemory's message starts "out of memory" (run_entry)
        break;
      }
    }
  });
  b->Repetitions(reps)->Unit(benchmark::kMicrosecond);
  if (manual) b->UseManualTime();
  else b->UseRealTime();
  if (iters > 0) {
    b->Iterations(iters);
    // Google Benchmark has no warm-up with a fixed iteration count: run untimed for `warmup` seconds.
    try {
      const auto t0 = std::chrono::steady_clock::now();
      while (warmup > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < warmup)
        cp->run();
    } catch (const std::exception&) {  // the timed run meets it again and records it
    }
  } else {
    b->MinTime(min_time);
    if (warmup > 0) b->MinWarmUpTime(warmup);
  }
  benchmark::RunSpecifiedBenchmarks(&col);
  benchmark::ClearRegisteredBenchmarks();
  return col.runs_;
}

void teardown(std::unique_ptr<Case>& c) {
  if (!c) return;
  try {
    c->teardown();
  } catch (...) {
  }
  c.reset();
}

long resident_bytes() {
  long pages = 0, rss = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return rss * sysconf(_SC_PAGESIZE);
}

}  // namespace

std::vector<json> run_case(const CaseSpec& spec, std::size_t index, const TimingPolicy& policy, const Peaks& peaks,
                           json& record) {
  // Host memory: VmHWM reset before setup, so the peak read after timing is this case's own (scope
  // "case"); where the reset is refused it is the process's peak so far (scope "process", monotone).
  const bool rss_per_case = reset_peak_rss();
  json meters = json::object();
  const NvtxRange nvtx_case(spec.id.name());  // nsys / ncu timelines show which case ran
  json base = base_entry(spec.id, index);
  std::vector<json> entries;
  std::unique_ptr<Case> c;
  try {
    c = spec.make();
    c->setup();
    const CheckResult chk = c->verify();
    base["verified"] = chk.ok;
    base["max_rel_err"] = chk.max_rel_err;
    base["tolerance"] = chk.tolerance;
    if (!chk.ok) {
      record = failure_entry(base, "verification failed: " + chk.message);
      entries.push_back(record);
    } else {
      const std::string fn = spec.id.name();
      double foreign_cpu = std::nan("");
      auto time_it = [&](int r) {
        const ForeignCpuProbe load;  // other processes' share of the CPUs while timing (compare reads it)
        const double children0 = c->child_cpu_seconds();
        auto runs = c->iterations() > 0 ? gb_time(c.get(), fn, r, 0, c->iterations(), 0)
                                        : gb_time(c.get(), fn, r, policy.min_time, 0, std::min(0.05, policy.min_time));
        foreign_cpu = load.fraction(c->child_cpu_seconds() - children0);
        return runs;
      };
      const int r0 = !policy.repetitions_given && c->repetitions() > 0 ? c->repetitions() : policy.repetitions;
      EnergyMark e0 = energy_mark(spec.id.device);
      double round_trip = core_round_trip_ns();  // the host's phase before the repetitions (cpu_load.h)
      auto runs = time_it(r0);
      // Noise-aware: a noisy first pass is redone once with twice the repetitions.
      if (policy.retry_noisy && r0 > 1 && r0 < 20 && !c->fixed_repetitions() && cv_of_iterations(runs) > policy.max_cv) {
        e0 = energy_mark(spec.id.device);
        round_trip = core_round_trip_ns();
        runs = time_it(std::min(20, 2 * r0));
      }
      const EnergyMark e1 = energy_mark(spec.id.device);
      double iters = 0;
      for (const auto& r : runs)
        if (r.run_type != benchmark::BenchmarkReporter::Run::RT_Aggregate && !r.error_occurred)
          iters += double(r.iterations) * double(std::max(1L, c->calls_per_run()));  // energy per call
      meters = energy_keys(e0, e1, iters, c->work().items);
      if (const auto rss = peak_rss_bytes()) {
        meters["host_peak_rss_bytes"] = *rss;
        meters["host_peak_rss_scope"] = rss_per_case ? "case" : "process";
      }
      // --profile: one more step, untimed, after the timing (bench/profile.h).
      if (!policy.trace_dir.empty()) {
        try {
          bench::ProfileResult pr;
          if (c->profile(pr)) meters["profile"] = bench::write_profile(policy.trace_dir, fn, pr);
        } catch (const std::exception& ex) {
          meters["profile"] = {{"error", ex.what()}};
        }
      }
      for (const auto& r : runs) {
        json e = run_entry(base, fn, r, foreign_cpu, *c, peaks);
        if (!r.error_occurred) e.update(meters);
        if (std::isfinite(round_trip)) {  // as the interleaved runner writes them, from one measurement
          if (r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate) e["core_round_trip_ns_range"] = {round_trip, round_trip};
          else if (!r.error_occurred) e["core_round_trip_ns"] = round_trip;
        }
        entries.push_back(std::move(e));
      }
      record = summary_record(entries);
    }
  } catch (...) {
    record = failure_from(base, std::current_exception());
    entries = {record};
  }
  teardown(c);
  return entries;
}

WindowResult run_window(const std::vector<std::pair<const CaseSpec*, std::size_t>>& window, const TimingPolicy& policy,
                        const Peaks& peaks, std::uint64_t seed, std::vector<std::size_t>* timing_order) {
  const bool rss_per_window = reset_peak_rss();  // the window's own peak, where the kernel lets us reset it
  struct Slot {
    const CaseSpec* spec;
    std::size_t index;
    std::string fn;
    json base;
    std::unique_ptr<Case> c;
    bool timing = false;  // set up and verified: to be timed
    int want = 0;         // repetitions
    double min_time = 0;
    long iters = 0;       // fixed iterations per repetition (the case's own, or the first round's)
    std::vector<Run> runs;
    std::vector<double> round_trip_ns;  // core_round_trip_ns() before each repetition's round
    WindowCase out;
  };
  WindowResult res;
  std::vector<Slot> slots;
  const long rss0 = resident_bytes();
  auto abandon = [&] {
    for (auto& s : slots) teardown(s.c);
    res.cases.clear();
    res.interrupted = true;
    return res;
  };
  // 1. Make, set up and verify every case of the window before any is timed.
  for (const auto& [spec, index] : window) {
    if (static_cast<int>(slots.size()) >= std::max(1, policy.window)) break;
    if (!slots.empty() && resident_bytes() - rss0 > policy.window_bytes) break;
    if (interrupt_requested()) return abandon();
    Slot s{spec, index, spec->id.name(), base_entry(spec->id, index), nullptr, false, 0, 0, 0, {}, {}, {}};
    try {
      s.c = spec->make();
      s.c->setup();
      const CheckResult chk = s.c->verify();
      s.base["verified"] = chk.ok;
      s.base["max_rel_err"] = chk.max_rel_err;
      s.base["tolerance"] = chk.tolerance;
      if (!chk.ok) {
        s.out.record = failure_entry(s.base, "verification failed: " + chk.message);
        s.out.entries = {s.out.record};
      } else {
        s.timing = true;
        s.want = !policy.repetitions_given && s.c->repetitions() > 0 ? s.c->repetitions() : policy.repetitions;
        s.iters = s.c->iterations();
        s.min_time = policy.min_time;
        // Tiny cases: one untimed iteration tells; microseconds are dominated by timer and cache state.
        if (s.iters == 0 && policy.tiny_min_time > policy.min_time) {
          const auto t0 = std::chrono::steady_clock::now();
          double secs = s.c->run();
          if (!s.c->manual_time()) secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (secs < policy.tiny_below_s) s.min_time = policy.tiny_min_time;
        }
      }
    } catch (...) {
      if (out_of_memory(std::current_exception()) && !slots.empty()) {
        teardown(s.c);  // beside the others it does not fit: it opens the next window
        break;
      }
      s.out.record = failure_from(s.base, std::current_exception());
      s.out.entries = {s.out.record};
      if (s.out.record.value("interrupted", false)) {
        teardown(s.c);
        return abandon();
      }
    }
    if (!s.timing) teardown(s.c);  // a failed case holds no memory while the others are timed
    slots.push_back(std::move(s));
  }
  // 2. Rounds: one repetition of every case that still wants one, in a shuffled order.
  std::mt19937_64 rng(seed);
  const ForeignCpuProbe load;  // other processes' share of the CPUs while the window was timed
  auto children_cpu = [&] {     // our own children's (the peer's epochs are part of the window)
    double t = 0;
    for (const auto& s : slots)
      if (s.c) t += s.c->child_cpu_seconds();
    return t;
  };
  const double children0 = children_cpu();
  auto round = [&](const std::function<bool(const Slot&)>& wants) {
    std::vector<Slot*> order;
    for (auto& s : slots)
      if (s.timing && wants(s)) order.push_back(&s);
    if (order.empty()) return false;
    std::shuffle(order.begin(), order.end(), rng);
    const double round_trip = core_round_trip_ns();  // the host's phase for this round (cpu_load.h)
    for (Slot* s : order) {
      if (interrupt_requested()) return false;
      if (timing_order) timing_order->push_back(s->index);
      // Warm-up: as back to back before the first repetition; a fifth of it before the later ones
      // (enough to bring the case's data back into the caches after the other cases ran).
      const double warm = s->c->iterations() > 0 ? 0 : std::min(0.05, s->min_time) / (s->runs.empty() ? 1 : 5);
      auto runs = s->iters > 0 ? gb_time(s->c.get(), s->fn, 1, 0, s->iters, warm)
                               : gb_time(s->c.get(), s->fn, 1, s->min_time, 0, warm);
      const Run* r = nullptr;
      for (const auto& x : runs)
        if (x.run_type == Run::RT_Iteration) r = &x;
      if (!r || r->error_occurred) {  // the error ends the case's timing; its error entry is its record
        s->timing = false;
        json e = r ? run_entry(s->base, s->fn, *r, std::nan(""), *s->c, peaks) : failure_entry(s->base, "no timing");
        if (!r) e["verified"] = false;
        s->out.record = e;
        s->out.entries = {e};
        continue;
      }
      if (s->iters == 0) s->iters = r->iterations;  // later rounds: the same iterations per repetition
      s->runs.push_back(*r);
      s->round_trip_ns.push_back(round_trip);
    }
    ++res.rounds;
    return true;
  };
  int rounds = 0;
  for (const auto& s : slots) rounds = std::max(rounds, s.want);
  for (int k = 0; k < rounds; ++k) {
    round([k](const Slot& s) { return s.want > k; });
    if (interrupt_requested()) return abandon();
  }
  // Noise-aware: a case whose repetitions vary more than max_cv gets as many again (at most 20).
  if (policy.retry_noisy) {
    for (auto& s : slots)
      if (s.timing && s.want > 1 && s.want < 20 && !s.c->fixed_repetitions() && cv_of_iterations(s.runs) > policy.max_cv)
        s.want = std::min(20, 2 * s.want);
    for (int k = rounds; k < 20; ++k) {
      if (!round([k](const Slot& s) { return s.want > k; })) break;
    }
    if (interrupt_requested()) return abandon();
  }
  const double foreign_cpu = load.fraction(children_cpu() - children0);
  // 3. Entries in Google Benchmark's shape. Meters are per window here: the peak host memory of the
  // window's cases set up together, and no energy per case (--no-interleave measures both per case).
  json meters = {{"energy_note", "not per case when interleaved (--no-interleave measures it)"}};
  if (const auto rss = peak_rss_bytes()) {
    meters["host_peak_rss_bytes"] = *rss;
    meters["host_peak_rss_scope"] = rss_per_window ? "window" : "process";
  }
  for (auto& s : slots) {
    if (s.timing) {
      std::vector<json> its;
      for (std::size_t k = 0; k < s.runs.size(); ++k) {
        json e = run_entry(s.base, s.fn, s.runs[k], foreign_cpu, *s.c, peaks);
        e["repetitions"] = s.runs.size();
        e["repetition_index"] = k;
        if (std::isfinite(s.round_trip_ns[k])) e["core_round_trip_ns"] = s.round_trip_ns[k];
        e.update(meters);
        its.push_back(std::move(e));
      }
      s.out.entries = its;
      for (auto& a : aggregate_entries(s.base, s.fn, its, *s.c, peaks)) s.out.entries.push_back(std::move(a));
      s.out.record = summary_record(s.out.entries);
    }
    teardown(s.c);
    res.cases.push_back(std::move(s.out));
  }
  return res;
}

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
  TimingPolicy policy;
  policy.repetitions = opts.repetitions > 0 ? opts.repetitions : 5;  // 5 a side: the fewest with which a Mann-Whitney test can reach p < 0.05
  policy.repetitions_given = opts.repetitions > 0;
  policy.min_time = opts.min_time > 0 ? opts.min_time : (opts.quick ? 0.02 : 0.1);
  policy.max_cv = opts.max_cv;
  policy.retry_noisy = !opts.quick;
  return policy;
}

namespace {

bool is_failure(const json& r) {
  return r.value("error_occurred", false) && !r.contains("skipped") && r.value("error", "") != "out of memory";
}

}  // namespace

int run_suites(const RunOptions& given) {
  RunOptions opts = given;
  // Back to back, not interleaved: a profiled step belongs to its case's own timing (one case set up
  // at a time, its memory and energy its own), and dist's ranks must run the same cases in lockstep
  // (the other ranks follow case by case, harness/dist.cpp).
  if (opts.extra.value("profile", false) ||
      std::find(opts.suites.begin(), opts.suites.end(), "dist") != opts.suites.end())
    opts.interleave = false;
  std::unique_ptr<InterruptScope> interrupt_scope;  // SIGINT, SIGTERM, SIGHUP: finish the case, write, exit 130
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
  // 1. Everything that can be wrong with the input is checked before anything runs.
  std::string device_note;
  const auto devices = resolve_devices(opts.device, &device_note);
  std::regex filter;
  if (!opts.filter.empty()) filter = compile_filter(opts.filter);  // bounded: sweep.h
  std::vector<std::pair<std::string, CaseSpec>> cases;  // (suite, case)
  std::size_t expanded = 0;                              // before --filter
  std::map<std::string, const bench::Suite*> suites;
  for (const auto& name : opts.suites) {
    const bench::Suite* s = bench::find_suite(name);
    if (!s) {
      std::string known;
      for (const auto& x : bench::all_suites()) known += (known.empty() ? "" : ", ") + x.name;
      throw UsageError("--suite '" + name + "': unknown suite (known: " + known + ")");
    }
    suites[name] = s;
    bench::SuiteOptions so;
    so.axes = suite_axes(name, opts.quick, opts.overrides);
    so.quick = opts.quick;
    so.devices = devices;
    so.extra = opts.extra;
    so.repetitions = opts.repetitions;
    for (auto& c : s->expand(so)) {
      ++expanded;
      if (opts.filter.empty() || std::regex_search(c.id.name(), filter)) cases.emplace_back(name, std::move(c));
    }
  }
  if (cases.empty())  // bad usage: nothing would run, and an empty results folder helps no one
    throw UsageError(expanded > 0 ? "--filter '" + opts.filter + "' matches none of the " + std::to_string(expanded) +
                                        " cases (see: dlbench list --suite ...)"
                                  : "nothing to run for --suite/--device as given (see: dlbench list)");
  if (!device_note.empty()) std::cerr << "dlbench: " << device_note << "\n";
  if (opts.list_only) {
    for (const auto& [s, c] : cases) std::cout << c.id.name() << "\n";
    return 0;
  }
  std::vector<std::string> planned;
  for (const auto& [s, c] : cases) planned.push_back(c.id.name());
  if (!writer) writer = std::make_unique<ResultsWriter>(opts.out, opts.out_mode);
  const bool resuming = opts.out_mode == OutMode::resume && writer->stored_header().is_object();
  if (resuming) {
    const json& h = writer->stored_header();
    check_same(h.value("options", json()), options_json(opts, devices), "flags", writer->dir());
    if (h.value("planned", json()) != json(planned))
      throw UsageError("--resume " + writer->dir() + ": the planned cases differ from that run's (another dlbench version?)");
    // A record that is not one of the planned cases (another run's, copied in) would make a mixed
    // folder that says "complete": refused, not kept.
    const std::set<std::string> plan(planned.begin(), planned.end());
    std::size_t foreign = 0;
    std::string first;
    for (const auto& e : writer->entries()) {
      const json& n = e.contains("run_name") ? e["run_name"] : e.value("name", json());
      if (n.is_string() && plan.count(n.get<std::string>())) continue;
      if (foreign++ == 0) first = n.is_string() ? n.get<std::string>() : std::string("a record without a name");
    }
    if (foreign > 0)
      throw InputError(writer->dir() + "/results.jsonl: " + std::to_string(foreign) + " record(s) not in the run's plan (first: " +
                       first + "); cannot resume a folder that mixes runs");
  }

  TimingPolicy policy = timing_policy(opts);
  if (opts.extra.value("profile", false)) policy.trace_dir = writer->dir();

  if (opts.min_time <= 0) policy.tiny_min_time = opts.quick ? 0.05 : 0.2;  // tiny cases: longer repetitions
  if (const long pages = sysconf(_SC_AVPHYS_PAGES); pages > 0)
    policy.window_bytes = std::min(policy.window_bytes, 0.25 * static_cast<double>(pages) * sysconf(_SC_PAGESIZE));
  // The rounds' shuffle seed: --seed, else a resumed run's own, else a random one (all recorded).
  std::uint64_t seed = opts.seed_given ? opts.seed : std::random_device{}();
  if (const json& h = writer->stored_header(); !opts.seed_given && resuming && h.contains("seed") && h["seed"].is_number_unsigned())
    seed = h["seed"].get<std::uint64_t>();
  // 2. Context: fingerprint + measured peaks.
  json context = fingerprint(opts.argv);
  if (resuming) {
    check_same(writer->stored_header().value("machine", json()), machine_json(context), "machine", writer->dir());
  } else {
    char host[128] = {0};
    gethostname(host, sizeof host - 1);
    writer->write_header({{"format", 1},
                          {"planned", planned},
                          {"options", options_json(opts, devices)},
                          {"machine", machine_json(context)},
                          {"argv", opts.argv},
                          {"host", host},
                          {"pid", getpid()},
                          {"seed", seed}});
  }
  Peaks peaks;
  bool cpu_cases = false;
  for (const auto& [s, c] : cases) cpu_cases |= c.id.device == "cpu" && s != "dist";  // dist: every core is a rank's
  json stored_peaks;  // resume: the interrupted run measured them already
  if (resuming) {
    try {
      const json prev = load_results(writer->dir() + "/results.json");
      if (prev.at("context").contains("peaks")) stored_peaks = prev.at("context").at("peaks");
    } catch (const std::exception&) {
    }
  }
  if (cpu_cases && stored_peaks.is_object() && stored_peaks.contains("cpu_fp32_gflops")) {
    peaks.cpu_fp32_gflops = stored_peaks.value("cpu_fp32_gflops", 0.0);
    peaks.cpu_mem_gb_per_s = stored_peaks.value("cpu_mem_gb_per_s", 0.0);
    peaks.cpu_fma_isa = stored_peaks.value("cpu_fma_isa", "");
    peaks.threads = stored_peaks.value("threads", 0);
    peaks.measured = true;
    context["peaks"] = stored_peaks;
  } else if (cpu_cases) {
    bool pool = false;  // the training and conv kernels call OpenBLAS from every pool thread
    for (const auto& [s, c] : cases) pool |= c.id.device == "cpu" && s != "matmul" && s != "transfer";
    const std::string no_room = cpu::openblas_reserve_buffers(pool);
    if (!no_room.empty()) throw UsageError("cannot run CPU cases: " + no_room);
    std::cerr << "dlbench: measuring CPU peaks (FMA, memory bandwidth)...\n";
    try {  // out of memory here (ulimit -v) marks the peaks unknown; the cases still run
      peaks = measure_cpu_peaks();
      context["peaks"] = {{"cpu_fp32_gflops", peaks.cpu_fp32_gflops},
                          {"cpu_mem_gb_per_s", peaks.cpu_mem_gb_per_s},
                          {"cpu_fma_isa", peaks.cpu_fma_isa},
                          {"threads", peaks.threads}};
    } catch (const std::exception& e) {
      const bool oom = dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const OutOfMemory*>(&e) ||
                       dynamic_cast<const std::system_error*>(&e);  // a thread that could not start
      peaks = Peaks{};
      context["peaks"] = {{"error", oom ? "out of memory" : e.what()}};
      std::cerr << "dlbench: CPU peaks not measured (" << (oom ? "out of memory" : e.what()) << "); no % of peak\n";
    }
  }
  // GPU ceilings: theoretical ones are in context.cuda.gpus; add what cuBLAS measures on each GPU used.
  for (const auto& d : devices) {
    if (!bench::is_gpu(d)) continue;
    try {
      const auto m = measure_gpu_peaks(bench::gpu_index(d));
      context["peaks"]["gpus"][d] = {{"cublas_sgemm_gflops", m.cublas_sgemm_gflops},
                                     {"cublas_hgemm_tc_gflops", m.cublas_hgemm_tc_gflops},
                                     {"data", kGpuProbeData}};
    } catch (const std::exception& e) {
      context["peaks"]["gpus"][d] = {{"error", e.what()}};
    }
  }
  if (suites.count("dist")) context["dist"] = dist_context();
  context["run"] = {{"suites", opts.suites},     {"devices", devices},   {"quick", opts.quick},
                    {"repetitions", policy.repetitions}, {"min_time_s", policy.min_time}, {"filter", opts.filter},
                    {"cases", cases.size()},     {"interrupted", false},
                    {"timing", opts.interleave ? json{{"mode", "interleaved"}, {"seed", seed}, {"window", policy.window},
                                                      {"tiny_min_time_s", policy.tiny_min_time},
                                                      {"tiny_below_s", policy.tiny_below_s}}
                                               : json{{"mode", "back-to-back"}}},
                    {"planned", planned},        {"state", "running"},   {"resumed", resuming}};
  writer->write_json(context);

  // Resume: the cases already in results.jsonl are kept as they are.
  std::map<std::string, json> kept;  // run_name -> its record (median entry, else its first)
  for (const auto& e : writer->entries()) {
    const std::string n = e.value("run_name", e.value("name", ""));
    if (!kept.count(n) || e.value("aggregate_name", "") == "median") kept[n] = e;
  }
  std::cerr << "dlbench: " << cases.size() << " case(s) -> " << writer->dir();
  if (!kept.empty()) std::cerr << " (resuming: " << kept.size() << " already done)";
  std::cerr << "\n";
  if (cases.empty())
    std::cerr << "dlbench: nothing to run for --suite/--device/--filter as given (see: dlbench list)\n";

  // 3. The loop: windows of interleaved cases (run_window), or with --no-interleave case by case.
  const auto t_start = std::chrono::steady_clock::now();
  int failed = 0;
  std::vector<json> records(cases.size());  // one per case, finished or kept
  std::size_t n_finished = 0;
  auto progress = [&](const json& record, bool show_eta) {
    std::ostringstream line;
    if (record.value("error_occurred", false)) {
      line << (record.contains("skipped") ? "SKIPPED " : "FAILED ") << record.value("error_message", "");
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "ok (err %.1e) ", record.value("max_rel_err", 0.0));
      line << buf << fmt_seconds(record.value("real_time", 0.0) * 1e-6);
      for (const char* k : {"gflops", "gb_per_s", "imgs_per_s"})
        if (record.contains(k)) {
          const char* unit = std::string(k) == "gflops" ? " GFLOP/s" : std::string(k) == "gb_per_s" ? " GB/s" : " imgs/s";
          line << "  " << fmt_number(record.at(k).get<double>()) << unit;
          break;
        }
      if (record.contains("pct_of_peak")) line << " (" << fmt_number(record.at("pct_of_peak").get<double>(), 3) << "% of peak)";
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    ++n_finished;
    std::cerr << line.str() << (show_eta ? eta(elapsed, n_finished, cases.size() - kept.size()) : "") << "\n";
    if (record.contains("profile")) {
      const json& p = record["profile"];
      const std::string name = record.value("run_name", record.value("name", ""));
      if (p.contains("error")) std::cerr << "dlbench: profile of " << name << " failed: " << p["error"].get<std::string>() << "\n";
      else bench::print_profile(std::cout, name, p);
    }
  };
  for (std::size_t i = 0; i < cases.size();) {
    if (interrupt_requested()) break;
    if (auto k = kept.find(cases[i].second.id.name()); k != kept.end()) {
      failed += is_failure(k->second);
      records[i++] = k->second;
      continue;
    }
    if (!opts.interleave) {
      const auto& spec = cases[i].second;
      std::cerr << progress_prefix(i, cases.size()) << spec.id.name() << " " << std::flush;
      json record;
      const auto entries = run_case(spec, i, policy, peaks, record);
      // A case that failed because the run was interrupted (its child process stopped) is not a result.
      if (record.value("interrupted", false) || (interrupt_requested() && record.value("error_occurred", false))) {
        std::cerr << "interrupted (not recorded)\n";
        break;
      }
      failed += is_failure(record);
      writer->append(entries);
      writer->write_json(context);
      records[i] = record;
      progress(record, true);
      ++i;
      continue;
    }
    // The next window: up to policy.window cases not already done (run_window may take fewer).
    std::vector<std::pair<const CaseSpec*, std::size_t>> window;
    for (std::size_t j = i; j < cases.size() && static_cast<int>(window.size()) < policy.window; ++j)
      if (!kept.count(cases[j].second.id.name())) window.emplace_back(&cases[j].second, j);
    std::cerr << progress_prefix(window.front().second, cases.size()) << "setting up and verifying up to "
              << window.size() << " case(s), then timing them interleaved\n";
    const WindowResult w = run_window(window, policy, peaks, seed + window.front().second);
    if (w.interrupted || w.cases.empty()) {
      std::cerr << "dlbench: interrupted (this window's cases are not recorded; --resume runs them)\n";
      break;
    }
    std::vector<json> all;
    for (const auto& c : w.cases) all.insert(all.end(), c.entries.begin(), c.entries.end());
    writer->append(all);  // the window's records at once (one write, synced)
    writer->write_json(context);
    for (std::size_t k = 0; k < w.cases.size(); ++k) {
      const std::size_t idx = window[k].second;
      records[idx] = w.cases[k].record;
      failed += is_failure(records[idx]);
      std::cerr << progress_prefix(idx, cases.size()) << cases[idx].second.id.name() << " ";
      progress(records[idx], k + 1 == w.cases.size());  // the ETA once the window is done
    }
    // Past the last case this window took (kept cases in between are picked up by the loop).
    i = window[w.cases.size() - 1].second + 1;
    for (std::size_t j = window.front().second; j < i; ++j)
      if (records[j].is_null() && kept.count(cases[j].second.id.name())) {
        records[j] = kept.at(cases[j].second.id.name());
        failed += is_failure(records[j]);
      }
  }
  std::map<std::string, std::vector<json>> summary;  // suite -> one record per case, in sweep order
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (!records[i].is_null()) summary[cases[i].first].push_back(records[i]);
  const bool interrupted = interrupt_requested();
  std::set<std::string> done;
  for (const auto& e : writer->entries()) done.insert(e.value("run_name", e.value("name", "")));
  std::size_t n_done = 0;
  for (const auto& p : planned) n_done += done.count(p);
  const bool all_done = n_done == planned.size();  // a signal during the last case still leaves a complete run
  context["run"]["interrupted"] = interrupted && !all_done;
  context["run"]["state"] = all_done ? "complete" : interrupted ? "interrupted" : "incomplete";
  context["run"]["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  writer->write_json(context);

  // 4. Tables: a generic one per suite, then the suite's own (the lecture layout, ...).
  for (const auto& name : opts.suites) {
    auto it = summary.find(name);
    if (it == summary.end()) continue;
    std::cout << "\n## " << name << "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : it->second) {
      std::string thr = "-", pct = "-";
      for (const char* k : {"gflops", "gb_per_s", "imgs_per_s"})
        if (r.contains(k)) {
          thr = fmt_number(r.at(k).get<double>()) + " " + (std::string(k) == "gflops" ? "GFLOP/s" : std::string(k) == "gb_per_s" ? "GB/s" : "imgs/s");
          break;
        }
      if (r.contains("pct_of_peak")) pct = fmt_number(r.at("pct_of_peak").get<double>(), 3);
      const bool err = r.value("error_occurred", false);
      const std::string status = r.contains("skipped") ? "skipped" : err ? (r.value("error", "") == "out of memory" ? "out of memory" : "FAILED") : "yes";
      rows.push_back({r.value("run_name", ""), status, err ? "-" : fmt_seconds(r.value("real_time", 0.0) * 1e-6), thr, pct});
    }
    print_table(std::cout, {"Case", "Verified", "Median time", "Throughput", "% of peak"}, rows);
    if (suites[name]->summarize) suites[name]->summarize(it->second, std::cout);
  }
  std::cout << "\nresults: " << writer->dir() << "/results.json (" << writer->entries().size() << " entries)\n";
  if (failed) std::cerr << "dlbench: " << failed << " case(s) failed\n";
  if (interrupted) {
    std::cerr << "dlbench: interrupted; results so far are in " << writer->dir() << "\n";
    return 130;
  }
  if (opts.report && !cases.empty()) {
    const std::string rep = writer->dir() + "/report";
    const int rc = generate_report({writer->dir()}, rep);
    if (rc == 0) std::cout << "report:  " << rep << "/index.html\n";
    if (rc == 130 || interrupt_requested()) return 130;
  }
  return failed ? 1 : 0;
}

}  // namespace dlb::harness
