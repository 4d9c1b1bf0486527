// A case's results entries (Google Benchmark's JSON keys plus ours): see records.cpp.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "bench/case.h"
#include "harness/meters.h"

namespace dlb::harness {

// A suite's throughput metric: its results key and unit, and the Google Benchmark counter that
// carries it for other tools (items_per_second: images or FLOP per second; bytes_per_second: GB/s of
// transfers and collectives), `per_second` counter units in one of ours. Conbench's adapter and
// Google Benchmark's tools read bytes_per_second, else items_per_second, else the time.
struct MetricInfo {
  const char* key;      // "gflops"
  const char* unit;     // "GFLOP/s"
  const char* counter;  // "items_per_second"
  double per_second;    // 1e9 FLOP/s per GFLOP/s
};
// Every metric, in the order an entry's headline throughput is looked for (a training entry carries
// imgs_per_s (or tokens_per_s) and gflops: images/s is its headline; a transfer with FLOPs reports GB/s first).
const std::vector<MetricInfo>& metric_table();
const MetricInfo* metric_info(const std::string& key);         // nullptr: not a metric
const MetricInfo* entry_metric(const nlohmann::json& entry);    // the headline metric it carries, or nullptr

// Adds the entry's throughput key (gflops, gb_per_s or imgs_per_s) and its counter for an iteration
// of `seconds` doing the given work, and pct_of_peak when `peak` (in peak_metric's unit) is known (> 0).
void add_throughput(nlohmann::json& entry, double seconds, double flops, double bytes, double items,
                    const std::string& metric, double peak);
// The unit pct_of_peak compares in: the metric's own, or GFLOP/s for an images/s or tokens/s case that
// counts its FLOPs (a training step's napkin math), so a training row has a % of the FMA peak too.
std::string peak_metric(const std::string& metric, double flops);

// This run's ceilings: CPU peaks are measured (kernels/cpu/peak.h), GPU ones come from properties.
struct Peaks {
  double cpu_fp32_gflops = 0, cpu_mem_gb_per_s = 0;
  std::string cpu_fma_isa;
  int threads = 0;
  bool measured = false;
};
Peaks measure_cpu_peaks();
// Whether a CPU bf16 entry's row ran on bf16 dot products (vdpbf16ps: two products per fp32 lane, so
// twice the FMA peak is its ceiling) rather than bf16 widened to fp32 FMAs (the FMA peak): the CPU has
// avx512_bf16 and the row either is a peer's (a PyTorch process, which DLB_CPU_ISA does not cap) or
// ran with our ISA level at avx512_bf16 (its cpu_isa; oneDNN is capped with our kernels).
bool cpu_bf16_native_row(const nlohmann::json& entry);
// The ceiling for an entry's metric on its device and dtype, or 0 when unknown.
double peak_for(const nlohmann::json& entry, const std::string& metric, const Peaks& peaks);

const char* metric_key(bench::Metric m);  // "gflops", "gb_per_s", "imgs_per_s" or "tokens_per_s"
// The keys every entry of a case carries: names, suite, op, device, dtype, the sweep keys, cpu_isa.
nlohmann::json base_entry(const bench::CaseId& id, std::size_t index);
// An iteration entry that records a failure (never timed).
nlohmann::json failure_entry(nlohmann::json e, const std::string& message);

// Energy counters of a case's device now: RAPL (CPU cases) or NVML (GPU cases). Empty when not readable.
struct EnergyMark {
  RaplReading rapl;
  std::optional<std::uint64_t> gpu_mj;
  std::string why_not;
};
EnergyMark energy_mark(const std::string& device);
// Keys for the records: energy_j per timed iteration and imgs_per_j (training cases), or energy_note
// "not readable here (...)". RAPL counts the whole CPU package, other processes included.
nlohmann::json energy_keys(const EnergyMark& a, const EnergyMark& b, double iterations, double items);

bool out_of_memory(std::exception_ptr ep);  // OutOfMemory or std::bad_alloc
// The record of a case that failed while it was made, set up, verified or timed.
nlohmann::json failure_from(const nlohmann::json& base, std::exception_ptr ep);

// A repetition (Google Benchmark's run of it, harness/run/timer.h) as a results entry.
nlohmann::json run_entry(const nlohmann::json& base, const std::string& fn, const benchmark::BenchmarkReporter::Run& r,
                         double foreign_cpu, const bench::Case& c, const Peaks& peaks);
// The case's record for tables: the median, or the only repetition.
nlohmann::json summary_record(const std::vector<nlohmann::json>& entries);
// The aggregates Google Benchmark would write (mean, median, stddev, cv; sample stddev, cv = stddev /
// mean) of the iteration entries, with its keys (dlbench computes them: docs/timing.md).
std::vector<nlohmann::json> aggregate_entries(const nlohmann::json& base, const std::string& fn,
                                              const std::vector<nlohmann::json>& its, const bench::Case& c,
                                              const Peaks& peaks);

}  // namespace dlb::harness
