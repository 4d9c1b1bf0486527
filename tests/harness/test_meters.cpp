// Host memory and energy meters (harness/meters.h): peak RSS and held memory from /proc (our
// children's too), RAPL parsing on a fake powercap tree (wraparound, sub-zones, unreadable counters,
// absent tree), NVML absent here.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "harness/meters.h"
#include "tests/child_holding.h"

using namespace dlb::harness;

namespace {

struct FakePowercap {
  std::string root;
  FakePowercap() {
    char tmpl[] = "/tmp/dlb_powercap_XXXXXX";
    root = ::mkdtemp(tmpl);
  }
  ~FakePowercap() { std::system(("rm -rf '" + root + "'").c_str()); }
  void zone(const std::string& dir, const std::string& name, const std::string& uj, const std::string& max) {
    ::mkdir((root + "/" + dir).c_str(), 0755);
    write(dir + "/name", name);
    if (!uj.empty()) write(dir + "/energy_uj", uj);
    if (!max.empty()) write(dir + "/max_energy_range_uj", max);
  }
  void write(const std::string& rel, const std::string& text) { std::ofstream(root + "/" + rel) << text << "\n"; }
};

}  // namespace

TEST(Meters, PeakRssIsReadAndResettable) {
  const auto before = peak_rss_bytes();
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(*before, 1u << 20);  // a process with gtest loaded is over 1 MiB
  // 64 MiB straight from the kernel (mmap, not malloc: under AddressSanitizer a freed block stays in
  // its quarantine, still resident), touched so the peak follows, then handed back with munmap.
  const std::size_t n = 64u << 20;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, n);
  const auto after = peak_rss_bytes();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + (60u << 20)) << static_cast<char*>(p)[12345];
  munmap(p, n);
  if (!reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs refused here";
  const auto reset = peak_rss_bytes();
  ASSERT_TRUE(reset.has_value());
  EXPECT_LT(*reset, *after);  // back to the current RSS, not the 64 MiB peak
}

// What an interleaved window holds (harness/run/engine.cpp): our anonymous memory and our children's,
// whose peaks count too (a peer case's work runs in its Python).
TEST(Meters, HeldBytesAndThePeakCountTheChildProcesses) {
  const std::uint64_t before = held_bytes();
  const auto peak_before = peak_rss_bytes();
  ASSERT_TRUE(peak_before.has_value());
  const std::size_t n = 64u << 20;
  {
    const dlb::test::ChildHolding child(n);
    EXPECT_GE(held_bytes(), before + (60u << 20));
    const auto peak = peak_rss_bytes();
    ASSERT_TRUE(peak.has_value());
    EXPECT_GE(*peak, *peak_before + (60u << 20));
  }
  EXPECT_LT(held_bytes(), before + (32u << 20));  // the child is gone
}

TEST(Meters, RaplPackagesOnlyAndJoules) {
  FakePowercap fake;
  fake.zone("intel-rapl:0", "package-0", "1000000", "262143328850");
  fake.zone("intel-rapl:0:0", "core", "500", "262143328850");  // sub-zone: inside package-0, not added
  fake.zone("intel-rapl:1", "package-1", "2000000", "262143328850");
  fake.zone("intel-rapl-mmio:0", "package-0", "7", "100");       // another control type: ignored
  const RaplReading a = read_rapl(fake.root);
  EXPECT_EQ(a.why_not, "");
  ASSERT_EQ(a.zones.size(), 2u);
  EXPECT_EQ(a.zones[0].name, "package-0");
  EXPECT_EQ(a.zones[1].name, "package-1");
  EXPECT_EQ(a.uj[1], 2000000u);
  fake.write("intel-rapl:0/energy_uj", "3500000");  // +2.5 J
  fake.write("intel-rapl:1/energy_uj", "2250000");  // +0.25 J
  EXPECT_NEAR(rapl_joules(a, read_rapl(fake.root)), 2.75, 1e-9);
}

TEST(Meters, RaplWraparound) {
  FakePowercap fake;
  fake.zone("intel-rapl:0", "package-0", "999000", "1000000");
  const RaplReading a = read_rapl(fake.root);
  fake.write("intel-rapl:0/energy_uj", "4000");  // wrapped at 1,000,000 uJ: 1000 + 4000 uJ
  EXPECT_NEAR(rapl_joules(a, read_rapl(fake.root)), 0.005, 1e-12);
}

TEST(Meters, RaplNotReadableHere) {
  const RaplReading none = read_rapl("/nonexistent/powercap");
  EXPECT_TRUE(none.zones.empty());
  EXPECT_NE(none.why_not.find("not readable here"), std::string::npos) << none.why_not;

  FakePowercap fake;
  fake.zone("intel-rapl:0", "package-0", "", "1000");  // no energy_uj (as when it is root-only)
  fake.zone("intel-rapl:1", "package-1", "12abc", "1000");  // not a number
  const RaplReading r = read_rapl(fake.root);
  EXPECT_TRUE(r.zones.empty());
  EXPECT_NE(r.why_not.find("not readable here"), std::string::npos) << r.why_not;

  ::setenv("DLBENCH_POWERCAP_ROOT", fake.root.c_str(), 1);
  EXPECT_EQ(powercap_root(), fake.root);
  ::unsetenv("DLBENCH_POWERCAP_ROOT");
  EXPECT_EQ(powercap_root(), "/sys/class/powercap");
}

TEST(Meters, NvmlSaysWhyWhenAbsent) {
  std::string why;
  const auto mj = nvml_energy_mj(0, &why);
  if (mj) GTEST_SKIP() << "this machine has NVML energy: " << *mj << " mJ";
  EXPECT_NE(why.find("not readable here"), std::string::npos) << why;
}
