// Foreign CPU load while a case runs (see cpu_load.h).
#include "harness/cpu_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

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

}  // namespace dlb::harness
