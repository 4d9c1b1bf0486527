// The timing engine (see engine.h): prepare, rounds, entries.
#include "harness/run/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "bench/case.h"
#include "harness/cpu_load.h"
#include "harness/meters.h"
#include "harness/run/stopping.h"
#include "harness/run/timer.h"
#include "kernels/common/device_bytes.h"
#include "kernels/common/child.h"
#include "kernels/common/nvtx.h"
#include "kernels/cpu/peak.h"

namespace dlb::harness {

using json = nlohmann::json;
using Run = benchmark::BenchmarkReporter::Run;

namespace {

struct Slot {
  const bench::CaseSpec* spec = nullptr;
  std::size_t index = 0;
  std::string fn;  // the case's name
  json base;
  std::unique_ptr<bench::Case> c;
  std::unique_ptr<StoppingRule> rule;
  bool timing = false;  // set up and verified: to be timed
  double min_time = 0;
  long iters = 0;  // fixed iterations per repetition (the case's own, or the first repetition's)
  std::vector<Run> runs;
  std::vector<double> seconds;        // per iteration, one per run (the stopping rule's input)
  std::vector<double> round_trip_ns;  // core_round_trip_ns() before each repetition's round
  CaseResult out;

  bool wants_more() const { return timing && rule->wanted(seconds) > static_cast<int>(runs.size()); }
};

void teardown(std::unique_ptr<bench::Case>& c) {
  if (!c) return;
  try {
    c->teardown();
  } catch (...) {
  }
  c.reset();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Device memory: every phase of a case runs as its owner (kernels/common/device_bytes.h), so its
// peak_device_bytes are its own in a window of cases set up together.
long owner(const Slot& s) { return long(s.index) + 1; }

// 1. Make, set up and verify; choose how the case's repetitions are timed. False: the case runs out
// of memory beside the cases already set up, and is left for the next window.
bool prepare(Slot& s, const TimingPolicy& policy, bool alone) {
  const MemOwnerScope own(owner(s));
  device_bytes().reset_peak();  // (an owner id an earlier run in this process used)
  try {
    s.c = s.spec->make();
    // Setup (plans, algorithm searches, autotuning, weights) and verification, timed apart from the
    // timed iterations and never part of them.
    auto t0 = std::chrono::steady_clock::now();
    s.c->setup();
    s.base["setup_s"] = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const CheckResult chk = s.c->verify();
    s.base["verify_s"] = seconds_since(t0);
    // The device peak is the timed iterations' (what the case holds, and what its steps add), not
    // the verification's: an eager twin or a reference it built and freed is not the case's cost.
    device_bytes().reset_peak();
    s.base["verified"] = chk.ok;
    s.base["max_rel_err"] = chk.max_rel_err;
    s.base["tolerance"] = chk.tolerance;
    if (!chk.ok) {
      s.out.record = failure_entry(s.base, "verification failed: " + chk.message);
      s.out.entries = {s.out.record};
    } else {
      s.timing = true;
      s.rule = stopping_rule(policy, *s.c);
      s.iters = s.c->iterations();
      s.min_time = policy.min_time;
      // Tiny cases: one untimed iteration tells; microseconds are dominated by timer and cache state.
      if (s.iters == 0 && policy.tiny_min_time > policy.min_time) {
        const auto t0 = std::chrono::steady_clock::now();
        double secs = s.c->run();
        if (!s.c->manual_time()) secs = seconds_since(t0);
        if (secs < policy.tiny_below_s) s.min_time = policy.tiny_min_time;
      }
    }
  } catch (...) {
    if (out_of_memory(std::current_exception()) && !alone) {
      teardown(s.c);
      return false;
    }
    s.out.record = failure_from(s.base, std::current_exception());
    s.out.entries = {s.out.record};
  }
  if (!s.timing) teardown(s.c);  // a failed case holds no memory while the others are timed
  return true;
}

// One repetition of slot s. False when it failed: the error entry is then the case's record.
bool time_one(Slot& s, const Peaks& peaks, bool others_ran) {
  const MemOwnerScope own(owner(s));
  // Warm-up: before the first repetition; a share of it before a later one when other cases are
  // timed in between (their data took the caches).
  double warm = 0;
  if (s.c->iterations() == 0 && (s.runs.empty() || others_ran))
    warm = std::min(timing::kWarmUpCap, s.min_time) * (s.runs.empty() ? 1.0 : timing::kLaterWarmUpShare);
  const auto r = time_repetition(*s.c, s.fn, s.iters, s.iters > 0 ? 0 : s.min_time, warm);
  if (!r || r->error_occurred) {
    s.timing = false;
    json e = r ? run_entry(s.base, s.fn, *r, std::nan(""), *s.c, peaks) : failure_entry(s.base, "no timing");
    if (!r) e["verified"] = false;
    s.out.record = e;
    s.out.entries = {e};
    return false;
  }
  if (s.iters == 0) s.iters = r->iterations;  // later repetitions: the same iterations
  s.runs.push_back(*r);
  s.seconds.push_back(r->GetAdjustedRealTime() * 1e-6);  // us per iteration (kMicrosecond) -> s
  return true;
}

// 3. The case's entries in Google Benchmark's shape, with the window's meters.
void build_entries(Slot& s, double foreign_cpu, const json& meters, const Peaks& peaks) {
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
  for (auto& a : aggregate_entries(s.base, s.fn, its, *s.c, peaks)) {
    a.update(meters);
    s.out.entries.push_back(std::move(a));
  }
  s.out.record = summary_record(s.out.entries);
}

// The FMA ceiling is probed before each round of a window that times CPU cases counting FLOPs (in
// a run whose peaks were measured): their % of peak is against the largest probe, the machine's
// ceiling while they ran. On a shared machine the run-start probe alone swung a gpt2 step's MFU
// from 42 to 92% (docs/notes/2026-11-26-gpt2-cpu.md). A probe is short (~10 ms): a neighbour's burst
// only lowers it, so the largest is the ceiling; the median of two (a 2-repetition window, one probe
// at 176 GFLOP/s, one at 235) put a oneDNN conv at 108% of "peak" (docs/notes/2026-11-27-audit.md).
// ~30 ms a round (timing::kWindowProbeReps).
bool probes_cpu_peak(const std::vector<Slot>& slots, const Peaks& peaks) {
  if (!peaks.measured || !(peaks.cpu_fp32_gflops > 0) || peaks.threads <= 0) return false;
  return std::any_of(slots.begin(), slots.end(), [](const Slot& s) {
    return s.timing && s.spec->id.device == "cpu" && s.c->work().flops > 0;
  });
}

}  // namespace

double window_cpu_ceiling(const std::vector<double>& probes) {
  return probes.empty() ? 0.0 : *std::max_element(probes.begin(), probes.end());
}

WindowResult measure(const std::vector<PlannedCase>& window, const TimingPolicy& policy, const Ordering& ordering,
                     const Peaks& peaks, std::vector<std::size_t>* timing_order) {
  const bool rss_reset = reset_peak_rss();  // the window's own peak, where the kernel lets us reset it
  WindowResult res;
  std::vector<Slot> slots;
  auto abandon = [&] {
    for (auto& s : slots) {
      const MemOwnerScope own(owner(s));
      teardown(s.c);
    }
    res.cases.clear();
    res.interrupted = true;
    return res;
  };
  auto stop_now = [&] { return interrupt_requested() && !ordering.finish_on_interrupt; };

  // 1. Prepare every case of the window before any is timed. What the window's cases hold (their
  // buffers, a peer's Python process) stays resident while each other is timed, and that is not
  // neutral: see kWindowBytes (constants.h).
  const double held0 = double(held_bytes());
  for (const auto& [spec, index] : window) {
    if (static_cast<int>(slots.size()) >= std::max(1, ordering.window)) break;
    if (!slots.empty() && double(held_bytes()) - held0 > ordering.window_bytes) break;
    if (interrupt_requested()) return abandon();
    Slot s;
    s.spec = spec, s.index = index, s.fn = spec->id.name(), s.base = base_entry(spec->id, index);
    const NvtxRange nvtx_case(s.fn);  // nsys / ncu timelines show which case was set up
    if (!prepare(s, policy, slots.empty())) break;
    if (!s.timing && s.out.record.value("interrupted", false)) return abandon();  // its child process was stopped
    slots.push_back(std::move(s));
  }

  // 2. Rounds.
  std::mt19937_64 rng(ordering.seed);
  const bool one = slots.size() == 1;
  const ForeignCpuProbe load;  // other processes' share of the CPUs while the window was timed
  auto children_cpu = [&] {     // our own children's (the peer's epochs are part of the window)
    double t = 0;
    for (const auto& s : slots)
      if (s.c) t += s.c->child_cpu_seconds();
    return t;
  };
  const double children0 = children_cpu();
  const std::string device = one ? slots.front().spec->id.device : "";
  const EnergyMark e0 = one ? energy_mark(device) : EnergyMark{};
  const bool interleaved = std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.timing; }) > 1;
  const bool probe = probes_cpu_peak(slots, peaks);
  std::vector<double> cpu_peak_probes;
  while (true) {
    std::vector<Slot*> order;
    for (auto& s : slots)
      if (s.wants_more()) order.push_back(&s);
    if (order.empty()) break;
    if (ordering.shuffle) std::shuffle(order.begin(), order.end(), rng);
    const double round_trip = core_round_trip_ns();  // the host's phase for this round (cpu_load.h)
    if (probe) cpu_peak_probes.push_back(cpu::fma_peak_gflops(peaks.threads, timing::kWindowProbeReps));
    for (Slot* s : order) {
      if (stop_now()) return abandon();
      if (timing_order) timing_order->push_back(s->index);
      const NvtxRange nvtx_case(s->fn);
      if (time_one(*s, peaks, interleaved)) s->round_trip_ns.push_back(round_trip);
    }
    ++res.rounds;
  }
  if (stop_now()) return abandon();
  const double foreign_cpu = load.fraction(children_cpu() - children0);

  // 3. Entries. Meters: the host memory peak of the window's cases set up together; energy per case
  // only when the case was timed alone.
  json meters = json::object();
  if (one && slots.front().timing) {
    double iters = 0;
    const Slot& s = slots.front();
    for (const auto& r : s.runs) iters += double(r.iterations) * double(std::max(1L, s.c->calls_per_run()));  // per call
    meters = energy_keys(e0, energy_mark(device), iters, s.c->work().items);
  } else {
    meters["energy_note"] = "not per case when interleaved (--no-interleave measures it)";
  }
  Peaks window_peaks = peaks;
  if (!cpu_peak_probes.empty()) window_peaks.cpu_fp32_gflops = window_cpu_ceiling(cpu_peak_probes);
  if (const auto rss = peak_rss_bytes()) {
    meters["host_peak_rss_bytes"] = *rss;
    meters["host_peak_rss_scope"] = !rss_reset ? "process" : one ? "case" : "window";
  }
  for (auto& s : slots) {
    const MemOwnerScope own(owner(s));  // (its annotate reads its device peak)
    if (s.timing) {
      json m = meters;
      if (!policy.trace_dir.empty()) {  // --profile: one more step, untimed, after the timing (bench/profile.h)
        try {
          bench::ProfileResult pr;
          if (s.c->profile(pr)) m["profile"] = bench::write_profile(policy.trace_dir, s.fn, pr);
        } catch (const std::exception& ex) {
          m["profile"] = {{"error", ex.what()}};
        }
      }
      if (!cpu_peak_probes.empty() && s.spec->id.device == "cpu") {
        // The FMA peak this case's % of peak is against (twice it for a native bf16 row: harness/records.h).
        m["cpu_peak_gflops"] = window_peaks.cpu_fp32_gflops;
        m["cpu_peak_probes"] = cpu_peak_probes.size();
        m["cpu_peak_spread"] =  // largest / smallest probe
            window_peaks.cpu_fp32_gflops / *std::min_element(cpu_peak_probes.begin(), cpu_peak_probes.end());
      }
      build_entries(s, foreign_cpu, m, window_peaks);
    }
    teardown(s.c);
    // A case that failed while a signal was pending (its child process stopped) is not a result.
    if (interrupt_requested() && s.out.record.value("error_occurred", false)) return abandon();
    res.cases.push_back(std::move(s.out));
  }
  return res;
}

std::vector<json> run_case(const bench::CaseSpec& spec, std::size_t index, const TimingPolicy& policy, const Peaks& peaks,
                           json& record) {
  const WindowResult w = measure({{&spec, index}}, policy, Ordering::back_to_back(), peaks);
  if (w.cases.empty()) {
    record = {{"interrupted", true}};
    return {};
  }
  record = w.cases.front().record;
  return w.cases.front().entries;
}

}  // namespace dlb::harness
