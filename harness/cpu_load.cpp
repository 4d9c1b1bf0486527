// Foreign CPU load while a case runs (see cpu_load.h).
#include "harness/cpu_load.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace dlb::harness {

namespace {

// Busy CPU seconds of the whole machine since boot: every field of the "cpu" line of /proc/stat
// except idle and iowait (guest time is already inside user). -1 when unreadable.
double machine_busy_s() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return -1;
  const long hz = sysconf(_SC_CLK_TCK);
  return static_cast<double>(user + nice + sys + irq + softirq + steal) / static_cast<double>(hz > 0 ? hz : 100);
}

double self_cpu_s() {
  double s = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage ru{};
    if (getrusage(who, &ru) == 0)
      s += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  }
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ForeignCpuProbe::ForeignCpuProbe() {
  busy0_ = machine_busy_s();
  self0_ = self_cpu_s();
  wall0_ = now_s();
  ok_ = busy0_ >= 0;
}

double ForeignCpuProbe::fraction(double own_children_s) const {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double wall = now_s() - wall0_;
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const double busy = machine_busy_s();
  if (!ok_ || busy < 0 || wall < 0.02 || ncpu < 1) return nan;
  const double foreign = (busy - busy0_) - (self_cpu_s() - self0_) - own_children_s;
  const double f = foreign / (wall * static_cast<double>(ncpu));
  return std::fmin(1.0, std::fmax(0.0, f));
}

double core_round_trip_ns() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return nan;
  int cpus[2] = {-1, -1};
  for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[k++] = c;
  auto pin = [](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  };
  // flag: 1 = ping's turn passed to echo, 0 = back, 2 = stop. At most 2000 trips or 20 ms a try (a
  // core busy with another process makes trips take scheduler slices: the figure then says so).
  constexpr int kTrips = 2000;
  constexpr double kMaxNs = 20e6;
  std::vector<double> tries;
  for (int t = 0; t < 3; ++t) {
    std::atomic<int> flag{0}, ready{0};
    std::atomic<bool> ok{true};
    double ns = nan;
    auto meet = [&](int cpu) {  // both pinned (or one failed) before either starts
      if (!pin(cpu)) ok = false;
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
      return ok.load();
    };
    std::thread echo([&] {
      if (!meet(cpus[1])) return;
      for (;;) {
        int f;
        while ((f = flag.load(std::memory_order_acquire)) == 0) {
        }
        if (f == 2) return;
        flag.store(0, std::memory_order_release);
      }
    });
    std::thread ping([&] {
      if (!meet(cpus[0])) return;
      const auto t0 = std::chrono::steady_clock::now();
      auto elapsed = [&] { return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count(); };
      int i = 0;
      while (i < kTrips) {
        flag.store(1, std::memory_order_release);
        while (flag.load(std::memory_order_acquire) != 0) {
        }
        if ((++i & 15) == 0 && elapsed() > kMaxNs) break;
      }
      ns = elapsed() / i;
      flag.store(2, std::memory_order_release);
    });
    ping.join();
    echo.join();
    if (!ok) return nan;
    tries.push_back(ns);
  }
  std::sort(tries.begin(), tries.end());
  return tries[1];
}

}  // namespace dlb::harness
