// What a case costs besides time: host memory (peak RSS) and energy (CPU package RAPL counters,
// GPU NVML total-energy counter), read around a case by the run loop. Each reader says "not
// readable here" (an empty optional / a reason) instead of failing when the machine hides it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlb::harness {

// Peak resident set size in bytes (VmHWM of /proc/PID/status) of this process plus each process
// below it (a peer's Python: its own peak since it started, in its case's setup), or nullopt.
std::optional<std::uint64_t> peak_rss_bytes();
// Resets VmHWM to the current RSS (writes "5" to /proc/self/clear_refs; Linux >= 4.0). True when it
// worked: the next peak_rss_bytes() is then this case's own peak, not the process's since start.
bool reset_peak_rss();

// Anonymous resident memory (RssAnon: heap, buffers; not the mapped libraries) of this process and
// of every process below it (a peer's Python, a loader's workers), in bytes; 0 where /proc hides it.
// What the cases of an interleaved window hold while each other is timed (harness/run/engine.cpp).
std::uint64_t held_bytes();

// RAPL through powercap: every top-level package zone ROOT/intel-rapl:N (N without ':' sub-zones)
// with energy_uj and max_energy_range_uj. ROOT defaults to /sys/class/powercap; $DLBENCH_POWERCAP_ROOT
// overrides it (tests point it at a fake tree).
struct RaplZone {
  std::string path, name;
  std::uint64_t max_range_uj = 0;
};
struct RaplReading {
  std::vector<RaplZone> zones;
  std::vector<std::uint64_t> uj;  // one per zone
  std::string why_not;            // non-empty when nothing is readable
};
std::string powercap_root();
RaplReading read_rapl(const std::string& root);
// Joules between two readings of the same zones, each counter's wraparound at max_energy_range_uj
// taken into account (at most one wrap per zone between the readings).
double rapl_joules(const RaplReading& a, const RaplReading& b);

// NVML's total energy (millijoules since the driver loaded) of GPU `index`, libnvidia-ml.so.1 opened
// with dlopen (no link-time dependency). nullopt with `why` set when absent. Never read on a GPU yet
// (the H100 run of 2026-11-27 interleaved its cases, which reads no energy per case).
std::optional<std::uint64_t> nvml_energy_mj(int index, std::string* why);

}  // namespace dlb::harness
