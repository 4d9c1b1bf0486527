// Transfer suite, host side: the verification pattern catches every kind of bad copy, the host
// memcpy cases verify and time through the harness, and sizes beyond this machine are "out of
// memory" results rather than crashes.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/suite.h"
#include "harness/run/engine.h"
#include "kernels/common/errors.h"
#include "kernels/common/pcie.h"
#include "kernels/cpu/memcpy.h"

using namespace dlb;
using dlb::bench::SuiteOptions;
using nlohmann::json;

namespace {

std::vector<bench::CaseSpec> cpu_cases(json sizes, json cache = json::array({"cold"})) {
  const bench::Suite& suite = *bench::find_suite("transfer");
  SuiteOptions o = suite.options(false, {{"size", sizes}, {"cache", cache}});
  o.devices = {"cpu"};
  return suite.expand(o);
}

harness::TimingPolicy quick() {
  harness::TimingPolicy p;
  p.repetitions = 2;
  p.min_time = 0.001;
  p.retry_noisy = false;
  return p;
}

}  // namespace

TEST(TransferPattern, RoundTripAtOddSizes) {
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(8), std::size_t(9), std::size_t(4099),
                        std::size_t(1000003)}) {
    std::vector<unsigned char> b(n + 1, 0xEE);
    cpu::fill_pattern(b.data(), n, 42);
    EXPECT_TRUE(cpu::check_pattern(b.data(), n, 42).ok()) << n;
    EXPECT_EQ(b[n], 0xEE) << "fill_pattern wrote past " << n << " bytes";
  }
}

TEST(TransferPattern, OtherSeedOrShiftIsDetected) {
  const std::size_t n = 4096;
  std::vector<unsigned char> a(n + 8);
  cpu::fill_pattern(a.data(), n + 8, 5);
  EXPECT_GT(cpu::check_pattern(a.data(), n, 6).mismatches, n / 2);      // a stale round (other seed)
  EXPECT_GT(cpu::check_pattern(a.data() + 8, n, 5).mismatches, n / 2);  // shifted by one word
  EXPECT_GT(cpu::check_pattern(a.data() + 1, n, 5).mismatches, n / 2);  // shifted by one byte
  std::vector<unsigned char> p(n);
  cpu::fill_pattern(p.data(), n, cpu::poison_seed(5));
  EXPECT_GT(cpu::check_pattern(p.data(), n, 5).mismatches, n / 2);  // the poison never passes
}

TEST(TransferPattern, FloatsAreFiniteInUnitInterval) {
  for (std::uint64_t j = 0; j < 100000; ++j) {
    const float v = cpu::pattern_float(9, j);
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
  }
}

TEST(TransferVerify, GoodCopiesPass) {
  for (std::size_t n : {std::size_t(1), std::size_t(13), std::size_t(65537)}) {
    std::vector<unsigned char> s(n), d(n);
    EXPECT_TRUE(cpu::verify_host_copy(cpu::memcpy_host_libc, d.data(), s.data(), n, 1).ok());
    EXPECT_TRUE(cpu::verify_host_copy(cpu::memcpy_host_reference, d.data(), s.data(), n, 2).ok());
  }
}

TEST(TransferVerify, CorruptedCopyFails) {
  const std::size_t n = 100003;
  std::vector<unsigned char> s(n), d(n);
  // One flipped byte: exactly one mismatch, at its offset.
  auto flip = [](void* dst, const void* src, std::size_t len) {
    std::memcpy(dst, src, len);
    static_cast<unsigned char*>(dst)[777] ^= 0x10;
  };
  const auto c = cpu::verify_host_copy(flip, d.data(), s.data(), n, 3);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_EQ(c.first, 777u);
  EXPECT_NE(cpu::describe(c, n).find("offset 777"), std::string::npos);
  // A copy that stops one byte short, and one that never happens.
  auto short_copy = [](void* dst, const void* src, std::size_t len) { std::memcpy(dst, src, len - 1); };
  const auto sc = cpu::verify_host_copy(short_copy, d.data(), s.data(), n, 4);
  EXPECT_FALSE(sc.ok());
  EXPECT_EQ(sc.first, n - 1);
  auto no_copy = [](void*, const void*, std::size_t) {};
  EXPECT_FALSE(cpu::verify_host_copy(no_copy, d.data(), s.data(), n, 5).ok());
}

TEST(TransferGuard, SizeBeyondHostMemoryIsOutOfMemory) {
  EXPECT_GT(cpu::host_available_bytes(), 0u);
  EXPECT_THROW(cpu::require_host_bytes(std::size_t(1) << 50, "test buffer"), OutOfMemory);
  EXPECT_NO_THROW(cpu::require_host_bytes(1 << 20, "test buffer"));
}

// Under a soft RLIMIT_AS 64 MiB above what is mapped now, the guard sees at most that much left and
// refuses more; the limit is restored before any assertion can end the test.
TEST(TransferGuard, AddressSpaceLimitIsMeasured) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer maps its shadow memory on demand: no address-space limit under it";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer maps its shadow memory on demand: no address-space limit under it";
#endif
#endif
  struct rlimit was {};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &was), 0);
  if (was.rlim_cur == RLIM_INFINITY) {
    EXPECT_EQ(cpu::address_space_left(), SIZE_MAX);
  }
  const std::size_t mib = std::size_t(1) << 20;
  long pages = 0;
  {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fscanf(f, "%ld", &pages), 1);
    std::fclose(f);
  }
  const std::size_t mapped = std::size_t(pages) * std::size_t(sysconf(_SC_PAGESIZE));
  struct rlimit tight = was;
  tight.rlim_cur = mapped + 64 * mib;
  if (was.rlim_cur != RLIM_INFINITY && tight.rlim_cur > was.rlim_cur) GTEST_SKIP() << "already limited below that";
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  const std::size_t left = cpu::address_space_left();
  bool refused = false, allowed = false;
  try {
    cpu::require_address_space(128 * mib, "test");
  } catch (const OutOfMemory&) {
    refused = true;
  }
  try {
    cpu::require_address_space(mib, "test");
    allowed = true;
  } catch (const OutOfMemory&) {
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &was), 0);
  EXPECT_LE(left, 64 * mib);
  EXPECT_GT(left, 32 * mib);  // the checks themselves map next to nothing
  EXPECT_TRUE(refused);
  EXPECT_TRUE(allowed);
}

TEST(TransferGuard, CacheFlusherCoversTheLastLevelCache) {
  EXPECT_GT(cpu::last_level_cache_bytes(), 0u);
  cpu::CacheFlusher small(1 << 20);
  EXPECT_EQ(small.bytes(), std::size_t(1) << 20);
  small.flush();
  cpu::CacheFlusher def;
  EXPECT_GE(def.bytes(), std::min<std::size_t>(2 * cpu::last_level_cache_bytes(), std::size_t(512) << 20));
}

TEST(TransferSuite, HostMemcpyCasesVerifyAndTime) {
  const auto specs = cpu_cases({1000003, 4096}, {"cold", "hot"});
  ASSERT_EQ(specs.size(), 4u);
  harness::Peaks peaks;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].id.op, "memcpy");
    EXPECT_EQ(specs[i].id.device, "cpu");
    json record;
    harness::run_case(specs[i], i, quick(), peaks, record);
    EXPECT_TRUE(record.value("verified", false)) << record.dump();
    EXPECT_FALSE(record.value("error_occurred", false)) << record.dump();
    EXPECT_GT(record.value("gb_per_s", 0.0), 0.0) << record.dump();
  }
}

TEST(TransferSuite, SizeLargerThanHostIsAnOutOfMemoryResult) {
  const auto specs = cpu_cases({2000000000000LL});  // 2 TB
  ASSERT_EQ(specs.size(), 1u);
  json record;
  harness::run_case(specs[0], 0, quick(), harness::Peaks{}, record);
  EXPECT_EQ(record.value("error", ""), "out of memory") << record.dump();
  EXPECT_FALSE(record.value("verified", true));
}

TEST(TransferSuite, UnknownCacheModeIsUsageError) {
  EXPECT_THROW(cpu_cases({1024}, {"lukewarm"}), UsageError);
}

// The PCIe ceiling: the line-code arithmetic, and a reading below Gen3 x8 (a VM's virtual bridge) or
// below a measured copy is doubted, so it gives no pct_of_peak.
TEST(TransferPcie, CeilingFromSysfsIsDroppedWhenImplausible) {
  EXPECT_NEAR(dlb::pcie_gb_per_s(2.5, 1), 0.25, 1e-12);                   // Gen1, 8b/10b
  EXPECT_NEAR(dlb::pcie_gb_per_s(32.0, 16), 32 * 16 * 128.0 / 130 / 8, 1e-9);  // Gen5 x16, ~63 GB/s
  EXPECT_EQ(dlb::pcie_gb_per_s(0, 16), 0.0);
  EXPECT_NEAR(dlb::pcie_gen3_x8_gb_per_s(), 7.877, 1e-3);
  const double gen5 = dlb::pcie_gb_per_s(32.0, 16);
  EXPECT_EQ(dlb::pcie_ceiling_doubt(gen5, 50.0), "");
  EXPECT_EQ(dlb::pcie_ceiling_doubt(gen5, 0.0), "");
  EXPECT_EQ(dlb::pcie_ceiling_doubt(dlb::pcie_gen3_x8_gb_per_s(), 7.0), "");
  EXPECT_NE(dlb::pcie_ceiling_doubt(dlb::pcie_gb_per_s(2.5, 1), 0.0).find("below Gen3 x8"), std::string::npos);
  EXPECT_NE(dlb::pcie_ceiling_doubt(dlb::pcie_gb_per_s(8.0, 4), 0.0).find("below Gen3 x8"), std::string::npos);
  EXPECT_NE(dlb::pcie_ceiling_doubt(gen5, 70.0).find("above the link"), std::string::npos);
}
