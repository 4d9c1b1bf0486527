// The GPU timing path on a real device (skipped without one): GpuCallTimer runs every call it
// enqueues (counted on the device), keeps one N per case, and the matmul, conv and amp GPU cases are
// verified, then timed N calls per event pair and reported per call with the L2 and peak-clock keys.
// Passed on an H100 (2026-11-27) once the median record carried calls_per_iteration.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "bench/gpu_timing.h"
#include "harness/run/engine.h"
#include "tests/gpu_test.h"

using namespace dlb;
using nlohmann::json;

namespace {
__global__ void count_call(unsigned long long* n) { atomicAdd(n, 1ull); }

// The first case of `suite` on cuda:0 whose name contains every one of `parts`.
bench::CaseSpec pick(const char* suite, json axes, const std::vector<std::string>& parts) {
  const bench::Suite& declared = *bench::find_suite(suite);
  bench::SuiteOptions o = declared.options(true, axes);
  o.devices = {"cuda:0"};
  for (auto& s : declared.expand(o)) {
    const std::string n = s.id.name();
    bool all = true;
    for (const auto& p : parts) all = all && n.find(p) != std::string::npos;
    if (all) return s;
  }
  ADD_FAILURE() << "no " << suite << " case with the given name parts";
  return {};
}

harness::TimingPolicy quick() {
  harness::TimingPolicy p;
  p.repetitions = 2;
  p.min_time = 0.01;
  p.retry_noisy = false;
  return p;
}

void expect_batched_record(const json& r) {
  EXPECT_TRUE(r.value("verified", false)) << r.dump();
  EXPECT_FALSE(r.value("error_occurred", false)) << r.dump();
  EXPECT_EQ(r.value("timing_method", ""), "events around back-to-back calls") << r.dump();
  const long n = r.value("calls_per_event_pair", 0L);
  EXPECT_GE(n, 1);
  if (n > 1) EXPECT_EQ(r.value("calls_per_iteration", 0L), n);
  EXPECT_TRUE(std::isfinite(r.value("real_time", NAN)) && r.value("real_time", 0.0) > 0) << r.dump();
  EXPECT_TRUE(r.contains("host_enqueue_us_per_call")) << r.dump();
  EXPECT_TRUE(r.contains("l2_resident")) << r.dump();
}
}  // namespace

TEST(GpuCallTimerGpu, EveryEnqueuedCallRunsAndNStaysFixed) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<unsigned long long> n(1);
  ASSERT_EQ(cudaMemset(n.data(), 0, n.bytes()), cudaSuccess);
  bench::GpuCallTimer t(0);
  unsigned long long enqueued = 0;
  auto call = [&] {
    count_call<<<1, 1>>>(n.data());
    ++enqueued;
  };
  const double first = t.time(call);
  const long calls = t.calls();
  EXPECT_GE(calls, 1);
  EXPECT_GT(first, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(t.time(call), 0);
    EXPECT_EQ(t.calls(), calls);  // every repetition measures the same N
  }
  unsigned long long ran = 0;
  ASSERT_EQ(cudaMemcpy(&ran, n.data(), sizeof ran, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(ran, enqueued);
  EXPECT_GE(enqueued, 1 + 4ull * calls);  // calibration + 4 timed pairs
  json r;
  t.annotate(r);
  EXPECT_EQ(r.value("calls_per_event_pair", 0L), calls);
  t.release();
  EXPECT_EQ(t.calls(), calls);  // kept for the harness after teardown
}

TEST(GpuCallTimerGpu, L2SizeIsRead) {
  SKIP_WITHOUT_GPU();
  EXPECT_GT(bench::device_l2_bytes(0), 0);
}

TEST(GpuCallTimerGpu, MatmulCasesArePerCallWithL2AndPeakClock) {
  SKIP_WITHOUT_GPU();
  for (const char* impl : {"impl=cublas/", "impl=warptile/", "impl=warptile_lb2/"}) {
    SCOPED_TRACE(impl);
    const auto spec = pick("matmul", {{"size", {256}}, {"dtype", {"fp32"}}}, {impl, "size=256"});
    json record;
    harness::run_case(spec, 0, quick(), harness::Peaks{}, record);
    expect_batched_record(record);
    EXPECT_EQ(record.value("l2_resident", false), true);  // three 256^2 fp32 matrices: 786 KB
    EXPECT_GT(record.value("peak_clock_mhz", 0.0), 0) << record.dump();
  }
}

TEST(GpuCallTimerGpu, ConvAndAmpCasesArePerCall) {
  SKIP_WITHOUT_GPU();
  json conv_axes = {{"layer", {"lecture.conv1"}}, {"layer_batch", {4}}, {"op", {"conv2d_fwd"}},
                    {"dtype", {"fp32"}}, {"deepbench", json::array()}, {"sweep_layer", json::array()}};
  const std::vector<bench::CaseSpec> specs = {
      pick("conv", conv_axes, {"impl=cudnn", "layer=lecture.conv1", "batch=4"}),
      pick("amp", {{"model", json::array()}, {"size", {512}}, {"dtype", {"fp32"}}}, {"amp/gemm/cuda:0/fp32"}),
      pick("amp", {{"model", json::array()}, {"size", {512}}, {"dtype", {"bf16"}}}, {"amp/cast/cuda:0/bf16"}),
  };
  for (const auto& s : specs) {
    SCOPED_TRACE(s.id.name());
    json record;
    harness::run_case(s, 0, quick(), harness::Peaks{}, record);
    expect_batched_record(record);
  }
}
