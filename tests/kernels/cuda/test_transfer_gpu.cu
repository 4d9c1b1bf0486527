// Transfer suite on a GPU: the device pattern matches the host's and catches a corrupted byte, and
// every copy mode (direction x host memory x api) copies the right bytes at odd and round sizes;
// the overlap experiment computes the right outputs from the right inputs. Skips without a device.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "bench/suite.h"
#include "kernels/cpu/memcpy.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"
#include "kernels/cuda/transfer.h"

using namespace dlb;
using nlohmann::json;

namespace {
std::vector<bench::CaseSpec> gpu_cases(json ops, json sizes) {
  const bench::Suite& suite = *bench::find_suite("transfer");
  bench::SuiteOptions o = suite.options(false, {{"op", ops}, {"size", sizes}});
  o.devices = {"cuda:0"};
  return suite.expand(o);
}
}  // namespace

TEST(TransferGpu, DevicePatternMatchesHostAndCatchesCorruption) {
  SKIP_WITHOUT_GPU();
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(8), std::size_t(4099), std::size_t((1 << 20) + 3)}) {
    cuda::DeviceBuffer<unsigned char> d(n);
    cuda::pattern_fill(d.data(), n, 77);
    EXPECT_TRUE(cuda::pattern_check(d.data(), n, 77).ok()) << n;
    EXPECT_FALSE(cuda::pattern_check(d.data(), n, 78).ok()) << n;
    std::vector<unsigned char> h(n);
    d.download(h.data(), n);
    EXPECT_TRUE(cpu::check_pattern(h.data(), n, 77).ok()) << "device and host patterns differ at n=" << n;
    const std::size_t k = n / 2;
    const unsigned char bad = static_cast<unsigned char>(h[k] ^ 0x01);
    ASSERT_EQ(cudaMemcpy(d.data() + k, &bad, 1, cudaMemcpyHostToDevice), cudaSuccess);
    const auto c = cuda::pattern_check(d.data(), n, 77);
    EXPECT_EQ(c.mismatches, 1u) << n;
    EXPECT_EQ(c.first, k) << n;
  }
}

TEST(TransferGpu, EveryCopyModeIsCorrect) {
  SKIP_WITHOUT_GPU();
  const std::vector<long long> sizes = {1, 7, 4099, (1 << 20) + 3, 4 << 20};
  const auto specs = gpu_cases({"h2d", "d2h", "d2d", "bidir"}, sizes);
  // Per size: h2d 3 host kinds x 2 apis, d2h 2 x 2 (no write-combined), d2d 2 apis, bidir 2 x async.
  ASSERT_EQ(specs.size(), sizes.size() * (6 + 4 + 2 + 2));
  std::set<std::string> modes;
  for (const auto& spec : specs) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto first = c->verify();
    EXPECT_TRUE(first.ok) << first.message;
    EXPECT_GT(c->run(), 0.0);
    const auto second = c->verify();  // a new pattern: the copy really moves this round's bytes
    EXPECT_TRUE(second.ok) << second.message;
    json e = json::object();
    c->annotate(e);
    EXPECT_GE(e.value("peak_device_bytes", std::size_t(0)), std::size_t(spec.id.params.back().second.get<long long>()));
    c->teardown();
    modes.insert(spec.id.op + "/" + spec.id.params[0].second.get<std::string>() + "/" + spec.id.params[1].second.get<std::string>());
  }
  EXPECT_EQ(modes.size(), 14u);
}

TEST(TransferGpu, DeviceBytesAreReturnedAfterTeardown) {
  SKIP_WITHOUT_GPU();
  const std::size_t before = cuda::current_device_bytes();
  for (const auto& spec : gpu_cases({"d2d", "bidir"}, {1 << 20})) {
    auto c = spec.make();
    c->setup();
    EXPECT_GE(cuda::current_device_bytes(), before + (2u << 20));
    c->teardown();
    c.reset();
    EXPECT_EQ(cuda::current_device_bytes(), before);
  }
}

TEST(TransferGpu, OverlapComputesTheRightBatches) {
  SKIP_WITHOUT_GPU();
  const auto specs = gpu_cases({"overlap"}, {1024, 1 << 20, 4 << 20});
  ASSERT_EQ(specs.size(), 2u);  // 1 KiB is below the overlap experiment's batch range
  for (const auto& spec : specs) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto r = c->verify();
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_GT(c->run(), 0.0);
    json e = json::object();
    c->annotate(e);
    EXPECT_GT(e.value("speedup", 0.0), 0.0);
    EXPECT_TRUE(e.contains("overlap_fraction"));
    c->teardown();
  }
}

TEST(TransferGpu, OverlapReferenceIsTheFmaChain) {
  // Host-only arithmetic, but it is what the device kernel is checked against.
  EXPECT_EQ(cuda::overlap_compute_reference(0.5f, 0), 0.5f);
  const float one = cuda::overlap_compute_reference(0.0f, 1);
  EXPECT_EQ(one, 1.0f / 1024.0f);
  EXPECT_NEAR(cuda::overlap_compute_reference(0.25f, 100000), 1.0f, 1e-4f);  // its fp32 fixed point
}

TEST(TransferGpu, PcieLinkIsAbsentOrPlausible) {
  SKIP_WITHOUT_GPU();
  std::string desc;
  const double g = cuda::pcie_link_gb_per_s(0, &desc);
  EXPECT_GE(g, 0.0);
  if (g > 0) {
    EXPECT_LT(g, 1000.0);
    EXPECT_NE(desc.find("GT/s"), std::string::npos);
  }
}
