// A case's results entries: its identity, a repetition or a failure as a record, throughput and % of
// peak, energy, and the aggregates of the repetitions (computed here, not by Google Benchmark). The
// engine (harness/run/engine.cpp) times; this file says what a record holds.
#include "harness/records.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <new>

#include "harness/fingerprint.h"
#include "harness/gpu_peaks.h"
#include "harness/meters.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/peak.h"

namespace dlb::harness {

using json = nlohmann::json;
using bench::Case;
using Run = benchmark::BenchmarkReporter::Run;

namespace {
// A GPU entry with a compute % of peak says which peak and which SM clock it assumed.
void note_peak_clock(json& e) {
  if (!e.contains("pct_of_peak") || !e.contains("gflops") || !bench::is_gpu(e.value("device", ""))) return;
  if (e.contains("gb_per_s") || e.contains("imgs_per_s") || e.contains("tokens_per_s")) return;  // the % is of another metric
  const int idx = bench::gpu_index(e.value("device", ""));
  for (const auto& g : cuda_info().gpus) {
    if (g.index != idx) continue;
    const GpuPeak p = gpu_peak(g, e.value("dtype", ""));
    if (!(p.gflops > 0)) return;
    e["peak_gflops"] = p.gflops;
    e["peak_clock_mhz"] = p.clock_mhz;
    e["peak_clock"] = p.clock;
  }
}
}  // namespace

const std::vector<MetricInfo>& metric_table() {
  static const std::vector<MetricInfo> t = {
      {"imgs_per_s", "images/s", "items_per_second", 1},
      {"tokens_per_s", "tokens/s", "items_per_second", 1},
      {"gb_per_s", "GB/s", "bytes_per_second", 1e9},
      {"gflops", "GFLOP/s", "items_per_second", 1e9},
  };
  return t;
}

const MetricInfo* metric_info(const std::string& key) {
  for (const auto& m : metric_table())
    if (key == m.key) return &m;
  return nullptr;
}

const MetricInfo* entry_metric(const json& e) {
  for (const auto& m : metric_table())
    if (e.contains(m.key) && e[m.key].is_number()) return &m;
  return nullptr;
}

const char* metric_key(bench::Metric m) {
  switch (m) {
    case bench::Metric::gflops: return "gflops";
    case bench::Metric::gb_per_s: return "gb_per_s";
    case bench::Metric::imgs_per_s: return "imgs_per_s";
    case bench::Metric::tokens_per_s: return "tokens_per_s";
  }
  return "gflops";
}

json base_entry(const bench::CaseId& id, std::size_t index) {
  json e;
  const std::string n = id.name();
  e["name"] = n;
  e["run_name"] = n;
  e["family_index"] = index;
  e["per_family_instance_index"] = 0;
  e["threads"] = 1;
  e["suite"] = id.suite;
  e["op"] = id.op;
  e["device"] = id.device;
  e["dtype"] = id.dtype;
  for (const auto& [k, v] : id.params) e[k] = v;
  if (id.device == "cpu") e["cpu_isa"] = cpu::isa_name(cpu::isa_active());  // the DLB_CPU_ISA level in force
  return e;
}

json failure_entry(json e, const std::string& message) {
  e["run_type"] = "iteration";
  e["repetitions"] = 0;
  e["repetition_index"] = 0;
  e["iterations"] = 0;
  e["real_time"] = 0;
  e["cpu_time"] = 0;
  e["time_unit"] = "us";
  e["error_occurred"] = true;
  e["error_message"] = message;
  return e;
}

Peaks measure_cpu_peaks() {
  const auto p = cpu::measure_peaks();
  Peaks k;
  k.cpu_fp32_gflops = p.fp32_gflops;
  k.cpu_mem_gb_per_s = p.mem_gb_per_s;
  k.cpu_fma_isa = p.fma_isa;
  k.threads = p.threads;
  k.measured = true;
  return k;
}

bool cpu_bf16_native_row(const json& e) {
  if (cpu::isa_detected() < cpu::Isa::avx512_bf16) return false;
  if (e.value("impl", "").rfind("pytorch", 0) == 0) return true;  // a peer process: DLB_CPU_ISA does not reach it
  return e.value("cpu_isa", "") == cpu::isa_name(cpu::Isa::avx512_bf16);
}

double peak_for(const json& e, const std::string& metric, const Peaks& peaks) {
  const std::string dev = e.value("device", ""), dtype = e.value("dtype", "");
  if (dev == "cpu") {
    if (metric == "gflops" && dtype == "fp32") return peaks.cpu_fp32_gflops;
    if (metric == "gflops" && dtype == "bf16") return (cpu_bf16_native_row(e) ? 2 : 1) * peaks.cpu_fp32_gflops;
    if (metric == "gb_per_s") return peaks.cpu_mem_gb_per_s;
    return 0;
  }
  if (!bench::is_gpu(dev)) return 0;
  const int idx = bench::gpu_index(dev);
  for (const auto& g : cuda_info().gpus) {
    if (g.index != idx) continue;
    if (metric == "gb_per_s") return g.peak_mem_gb_per_s;
    if (metric != "gflops") return 0;
    return gpu_peak(g, dtype).gflops;  // harness/gpu_peaks.h: fp32 or tensor-core, with its clock
  }
  return 0;
}

void add_throughput(json& e, double seconds, double flops, double bytes, double items, const std::string& metric,
                    double peak) {
  if (!(seconds > 0)) return;
  double v = 0;
  if (metric == "gflops") v = flops / seconds * 1e-9;
  else if (metric == "gb_per_s") v = bytes / seconds * 1e-9;
  else v = items / seconds;
  e[metric] = v;
  if (const MetricInfo* m = metric_info(metric)) e[m->counter] = v * m->per_second;
  if (flops > 0 && metric != "gflops") e["gflops"] = flops / seconds * 1e-9;
  const double rate = peak_metric(metric, flops) == metric ? v : flops / seconds * 1e-9;
  if (peak > 0) e["pct_of_peak"] = 100.0 * rate / peak;
}

std::string peak_metric(const std::string& metric, double flops) {
  return metric != "gb_per_s" && flops > 0 ? "gflops" : metric;
}

EnergyMark energy_mark(const std::string& device) {
  EnergyMark m;
  if (bench::is_gpu(device)) {
    m.gpu_mj = nvml_energy_mj(bench::gpu_index(device), &m.why_not);
  } else {
    m.rapl = read_rapl(powercap_root());
    m.why_not = m.rapl.why_not;
  }
  return m;
}

// Keys for the records: energy_j per timed iteration and imgs_per_j (training cases), or energy_note
// "not readable here (...)". RAPL counts the whole CPU package, other processes included.
json energy_keys(const EnergyMark& a, const EnergyMark& b, double iterations, double items) {
  if (!a.why_not.empty() || !b.why_not.empty() || !(iterations > 0))
    return {{"energy_note", a.why_not.empty() ? b.why_not : a.why_not}};
  double j = 0;
  json out;
  if (a.gpu_mj) {
    j = double(*b.gpu_mj - *a.gpu_mj) * 1e-3;
    out["energy_source"] = "nvml total energy";
  } else {
    j = rapl_joules(a.rapl, b.rapl);
    out["energy_source"] = "rapl package";
  }
  out["energy_j"] = j / iterations;
  if (items > 0 && j > 0) out["imgs_per_j"] = items * iterations / j;
  return out;
}

bool out_of_memory(std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const OutOfMemory&) {
    return true;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    return false;
  }
}

// The record of a case that failed while it was made, set up, verified or timed.
json failure_from(const json& base, std::exception_ptr ep) {
  json r;
  try {
    std::rethrow_exception(ep);
  } catch (const Interrupted& e) {
    r = failure_entry(base, e.what());
    r["interrupted"] = true;
  } catch (const OutOfMemory& e) {
    r = failure_entry(base, e.what());
    r["error"] = "out of memory";
    r["verified"] = false;
  } catch (const std::bad_alloc&) {  // a container of ours or a library's that could not grow
    r = failure_entry(base, "out of memory: a host allocation failed (std::bad_alloc)");
    r["error"] = "out of memory";
    r["verified"] = false;
  } catch (const Unsupported& e) {
    r = failure_entry(base, std::string("skipped: ") + e.what());
    r["skipped"] = e.what();
  } catch (const std::exception& e) {
    r = failure_entry(base, e.what());
    r["verified"] = false;
  } catch (...) {
    r = failure_entry(base, "unknown error");
    r["verified"] = false;
  }
  return r;
}

// A repetition (Google Benchmark's run of it, harness/run/timer.h) as a results entry.
json run_entry(const json& base, const std::string& fn, const Run& r, double foreign_cpu, const Case& c,
               const Peaks& peaks) {
  json e = base;
  e["name"] = fn;
  e["run_type"] = "iteration";
  e["repetitions"] = r.repetitions;
  e["repetition_index"] = r.repetition_index;
  // A case that makes N back-to-back calls per iteration (Case::calls_per_run) is reported per call.
  const long calls = std::max(1L, c.calls_per_run());
  e["iterations"] = r.iterations * calls;
  if (calls > 1) e["calls_per_iteration"] = calls;
  e["real_time"] = r.GetAdjustedRealTime() / double(calls);
  e["cpu_time"] = r.GetAdjustedCPUTime() / double(calls);
  e["time_unit"] = "us";
  if (std::isfinite(foreign_cpu)) e["foreign_cpu"] = foreign_cpu;
  const std::string metric = metric_key(c.metric());
  const bench::Work w = c.work();
  if (r.error_occurred) {
    e["error_occurred"] = true;
    e["error_message"] = r.error_message;
    // Out of memory in a timed run (the timer passes OutOfMemory's message on): marked as in setup.
    if (r.error_message.rfind("out of memory", 0) == 0) e["error"] = "out of memory", e["verified"] = false;
  } else {
    add_throughput(e, e["real_time"].get<double>() * 1e-6, w.flops, w.bytes, w.items, metric, peak_for(e, peak_metric(metric, w.flops), peaks));
    note_peak_clock(e);
  }
  c.annotate(e);
  return e;
}

// The case's record for tables: the median, or the only repetition.
json summary_record(const std::vector<json>& entries) {
  for (const auto& e : entries)
    if (e.value("aggregate_name", "") == "median") return e;
  return entries.empty() ? json() : entries.front();
}

// The aggregates Google Benchmark would write (mean, median, stddev, cv; sample stddev, cv = stddev /
// mean) of the iteration entries, with its keys.
std::vector<json> aggregate_entries(const json& base, const std::string& fn, const std::vector<json>& its,
                                    const Case& c, const Peaks& peaks) {
  const std::size_t n = its.size();
  if (n < 2) return {};
  auto stats = [&](const char* key) {
    std::vector<double> v;
    for (const auto& e : its) v.push_back(e.at(key).get<double>());
    double mean = 0;
    for (double x : v) mean += x;
    mean /= n;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    const double sd = std::sqrt(ss / (n - 1));
    std::sort(v.begin(), v.end());
    const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return std::array<double, 4>{mean, median, sd, mean > 0 ? sd / mean : 0};
  };
  const auto real = stats("real_time"), cpu = stats("cpu_time");
  const char* names[] = {"mean", "median", "stddev", "cv"};
  const std::string metric = metric_key(c.metric());
  const bench::Work w = c.work();
  std::vector<json> out;
  for (int k = 0; k < 4; ++k) {
    json e = base;
    e["name"] = fn + "_" + names[k];
    e["run_type"] = "aggregate";
    e["repetitions"] = n;
    e["aggregate_name"] = names[k];
    e["aggregate_unit"] = k == 3 ? "percentage" : "time";
    e["iterations"] = n;
    e["real_time"] = real[k];
    e["cpu_time"] = cpu[k];
    e["time_unit"] = "us";
    for (const char* k : {"foreign_cpu", "energy_note", "host_peak_rss_bytes", "host_peak_rss_scope", "calls_per_iteration"})
      if (its.front().contains(k)) e[k] = its.front()[k];
    double rt_lo = INFINITY, rt_hi = -INFINITY;  // the repetitions' core round trips, when measured
    for (const auto& r : its)
      if (r.contains("core_round_trip_ns")) {
        rt_lo = std::fmin(rt_lo, r["core_round_trip_ns"].get<double>());
        rt_hi = std::fmax(rt_hi, r["core_round_trip_ns"].get<double>());
      }
    if (rt_lo <= rt_hi) e["core_round_trip_ns_range"] = {rt_lo, rt_hi};
    if (k < 2) {
      add_throughput(e, real[k] * 1e-6, w.flops, w.bytes, w.items, metric, peak_for(e, peak_metric(metric, w.flops), peaks));
      note_peak_clock(e);
    }
    c.annotate(e);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace dlb::harness
