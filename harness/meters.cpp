// Host memory and energy meters (see meters.h).
#include "harness/meters.h"
#include "kernels/common/safe_file.h"

#include <dirent.h>
#include <unistd.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dlb::harness {

namespace {
// A "Key:   N kB" line of /proc/PID/status, in bytes; nullopt when the file or the line is absent.
std::optional<std::uint64_t> status_bytes(const std::string& pid, const std::string& key) {
  std::ifstream f("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream in(line.substr(key.size() + 1));
    std::uint64_t kb = 0;
    if (in >> kb) return kb * 1024;  // the kernel writes kB
  }
  return std::nullopt;
}

// The processes below this one (the children of each of its threads, /proc/PID/task/TID/children,
// Linux >= 3.5), and theirs, breadth first.
std::vector<std::string> descendants() {
  std::vector<std::string> all = {std::to_string(getpid())};
  for (std::size_t i = 0; i < all.size() && all.size() < 4096; ++i) {  // (a bound: /proc is read live)
    const std::string tasks = "/proc/" + all[i] + "/task";
    DIR* d = opendir(tasks.c_str());
    if (!d) continue;
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(tasks + "/" + e->d_name + "/children");
      for (std::string c; f >> c;) all.push_back(c);
    }
    closedir(d);
  }
  all.erase(all.begin());
  return all;
}
}  // namespace

std::optional<std::uint64_t> peak_rss_bytes() {
  auto peak = status_bytes("self", "VmHWM");
  if (peak)
    for (const auto& pid : descendants()) *peak += status_bytes(pid, "VmHWM").value_or(0);
  return peak;
}

std::uint64_t held_bytes() {
  std::uint64_t total = status_bytes("self", "RssAnon").value_or(0);
  for (const auto& pid : descendants()) total += status_bytes(pid, "RssAnon").value_or(0);
  return total;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return bool(f);
}

std::string powercap_root() {
  if (const char* r = std::getenv("DLBENCH_POWERCAP_ROOT"); r && *r) return r;
  return "/sys/class/powercap";
}

namespace {

// A counter file's text through the one safe reader: a FIFO, device or oversized file under
// DLBENCH_POWERCAP_ROOT is refused (*why says so), never waited on or read without bound.
bool read_small(const std::string& path, std::string& text, std::string* why = nullptr) {
  try {
    text = read_file_safely(path, 4096);
    return true;
  } catch (const std::exception& e) {
    if (why && ::access(path.c_str(), R_OK) == 0) *why = e.what();  // there and readable, but not a counter file
    return false;
  }
}

bool read_u64(const std::string& path, std::uint64_t& v, std::string* why = nullptr) {
  std::string text;
  if (!read_small(path, text, why)) return false;
  std::istringstream f(text);
  std::string s;
  if (!(f >> s) || s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  errno = 0;
  char* end = nullptr;
  v = std::strtoull(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

}  // namespace

RaplReading read_rapl(const std::string& root) {
  RaplReading r;
  DIR* d = ::opendir(root.c_str());
  if (!d) {
    r.why_not = "not readable here (no " + root + ")";
    return r;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    // Package zones only: intel-rapl:0, intel-rapl:1 (sub-zones intel-rapl:0:0 are inside them).
    if (n.rfind("intel-rapl:", 0) == 0 && n.find(':', 11) == std::string::npos) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  bool denied = false;
  std::string refused;
  for (const auto& n : names) {
    RaplZone z;
    z.path = root + "/" + n;
    std::uint64_t uj = 0;
    if (!read_u64(z.path + "/energy_uj", uj, &refused)) {
      denied = true;  // present but unreadable (root-only since 2020 on most kernels) or not a number
      continue;
    }
    if (!read_u64(z.path + "/max_energy_range_uj", z.max_range_uj, &refused)) z.max_range_uj = 0;
    if (read_small(z.path + "/name", z.name, &refused)) z.name = z.name.substr(0, z.name.find('\n'));
    else z.name.clear();
    if (!refused.empty()) continue;
    r.zones.push_back(z);
    r.uj.push_back(uj);
  }
  if (!refused.empty()) {
    r.zones.clear(), r.uj.clear();
    r.why_not = "not readable here (" + refused + ")";
    return r;
  }
  if (r.zones.empty())
    r.why_not = names.empty() ? "not readable here (no RAPL package zone under " + root + ")"
                              : std::string("not readable here (RAPL energy_uj ") + (denied ? "unreadable" : "absent") + ")";
  return r;
}

double rapl_joules(const RaplReading& a, const RaplReading& b) {
  double uj = 0;
  for (std::size_t i = 0; i < a.zones.size() && i < b.zones.size(); ++i) {
    if (a.zones[i].path != b.zones[i].path) continue;
    const std::uint64_t x = a.uj[i], y = b.uj[i];
    if (y >= x) uj += double(y - x);
    else if (a.zones[i].max_range_uj > x) uj += double(a.zones[i].max_range_uj - x) + double(y);  // wrapped once
  }
  return uj * 1e-6;
}

namespace {

// The few NVML entry points used, declared here so no NVML header is needed at build time.
using nvml_ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using nvml_dev = void*;
struct Nvml {
  void* lib = nullptr;
  nvml_ret (*init)() = nullptr;
  nvml_ret (*by_index)(unsigned, nvml_dev*) = nullptr;
  nvml_ret (*energy)(nvml_dev, unsigned long long*) = nullptr;
  std::string why;
};

const Nvml& nvml() {
  static const Nvml n = [] {
    Nvml v;
    v.lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v.lib) {
      v.why = "not readable here (no libnvidia-ml.so.1: no NVIDIA driver)";
      return v;
    }
    v.init = reinterpret_cast<nvml_ret (*)()>(::dlsym(v.lib, "nvmlInit_v2"));
    v.by_index = reinterpret_cast<nvml_ret (*)(unsigned, nvml_dev*)>(::dlsym(v.lib, "nvmlDeviceGetHandleByIndex_v2"));
    v.energy = reinterpret_cast<nvml_ret (*)(nvml_dev, unsigned long long*)>(
        ::dlsym(v.lib, "nvmlDeviceGetTotalEnergyConsumption"));
    if (!v.init || !v.by_index || !v.energy) v.why = "not readable here (NVML lacks the energy counter)";
    else if (v.init() != 0) v.why = "not readable here (nvmlInit failed)";
    return v;
  }();
  return n;
}

}  // namespace

std::optional<std::uint64_t> nvml_energy_mj(int index, std::string* why) {
  const Nvml& n = nvml();
  if (!n.why.empty()) {
    if (why) *why = n.why;
    return std::nullopt;
  }
  // NVML numbers GPUs in PCI order, CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID: the same on
  // single-GPU machines. TODO when a multi-GPU machine is at hand: map by PCI bus id.
  nvml_dev d = nullptr;
  unsigned long long mj = 0;
  if (n.by_index(unsigned(index), &d) != 0 || n.energy(d, &mj) != 0) {
    if (why) *why = "not readable here (this GPU has no NVML energy counter: pre-Volta?)";
    return std::nullopt;
  }
  return std::uint64_t(mj);
}

}  // namespace dlb::harness
