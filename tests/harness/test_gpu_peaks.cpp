// The GPU peak table (harness/gpu_peaks.h): tensor-core peaks at the datasheet boost clock, FP32 at the
// maximum clock, every peak with its clock; unknown GPUs fall back to the maximum clock, said so.
#include <gtest/gtest.h>

#include "harness/fingerprint.h"
#include "harness/gpu_peaks.h"

using dlb::GpuInfo;
using dlb::harness::gpu_peak;
using dlb::harness::gpu_peaks_json;

namespace {
GpuInfo gpu(const char* name, int major, int minor, int sms, double max_mhz, int fp32_lanes) {
  GpuInfo g;
  g.name = name, g.cc_major = major, g.cc_minor = minor, g.sms = sms, g.sm_clock_mhz = max_mhz;
  g.peak_fp32_gflops = sms * fp32_lanes * 2.0 * max_mhz * 1e-3;  // as kernels/cuda/device_info.cpp
  return g;
}
}  // namespace

TEST(GpuPeaks, H100SxmAtTheDatasheetClocks) {
  const GpuInfo h100 = gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, 128);
  const auto bf16 = gpu_peak(h100, "bf16"), fp16 = gpu_peak(h100, "fp16"), tf32 = gpu_peak(h100, "tf32");
  EXPECT_NEAR(bf16.gflops, 989.4e3, 1e3);  // NVIDIA: 989 TFLOP/s dense, not 1070 at 1980 MHz
  EXPECT_DOUBLE_EQ(bf16.clock_mhz, 1830);
  EXPECT_NE(bf16.clock.find("datasheet"), std::string::npos);
  EXPECT_DOUBLE_EQ(fp16.gflops, bf16.gflops);
  EXPECT_NEAR(tf32.gflops, 494.7e3, 1e3);
  const auto fp32 = gpu_peak(h100, "fp32");
  EXPECT_NEAR(fp32.gflops, 66.9e3, 0.1e3);  // the FP32 datasheet figure is at the maximum clock
  EXPECT_DOUBLE_EQ(fp32.clock_mhz, 1980);
  EXPECT_FALSE(fp32.clock.empty());
}

TEST(GpuPeaks, OtherKnownGpus) {
  EXPECT_NEAR(gpu_peak(gpu("NVIDIA H200", 9, 0, 132, 1980, 128), "bf16").gflops, 989.4e3, 1e3);
  EXPECT_NEAR(gpu_peak(gpu("NVIDIA H100 PCIe", 9, 0, 114, 1755, 128), "bf16").gflops, 756.5e3, 1e3);
  const auto a100 = gpu_peak(gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, 64), "bf16");
  EXPECT_NEAR(a100.gflops, 311.9e3, 1e3);
  EXPECT_DOUBLE_EQ(a100.clock_mhz, 1410);
  EXPECT_NEAR(gpu_peak(gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, 64), "fp32").gflops, 19.5e3, 0.1e3);
}

TEST(GpuPeaks, UnknownGpuFallsBackToTheMaximumClockAndSaysSo) {
  const GpuInfo nvl = gpu("NVIDIA H100 NVL", 9, 0, 132, 1785, 128);
  const auto p = gpu_peak(nvl, "bf16");
  EXPECT_DOUBLE_EQ(p.clock_mhz, 1785);
  EXPECT_NEAR(p.gflops, 132 * 4096 * 1785e-3, 1);
  EXPECT_NE(p.clock.find("maximum"), std::string::npos);
  // No tensor-core table for this architecture: no tensor peak (0), the FP32 one still there.
  const GpuInfo ada = gpu("NVIDIA GeForce RTX 4090", 8, 9, 128, 2520, 128);
  EXPECT_EQ(gpu_peak(ada, "bf16").gflops, 0);
  EXPECT_GT(gpu_peak(ada, "fp32").gflops, 0);
}

TEST(GpuPeaks, JsonStatesTheClockOfEveryPeak) {
  const auto j = gpu_peaks_json(gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, 128));
  for (const char* d : {"fp32", "tf32", "fp16", "bf16"}) {
    ASSERT_TRUE(j.contains(d)) << d;
    EXPECT_GT(j.at(d).at("gflops").get<double>(), 0) << d;
    EXPECT_GT(j.at(d).at("clock_mhz").get<double>(), 0) << d;
    EXPECT_FALSE(j.at(d).at("clock").get<std::string>().empty()) << d;
  }
  EXPECT_FALSE(gpu_peaks_json(gpu("NVIDIA GeForce RTX 4090", 8, 9, 128, 2520, 128)).contains("bf16"));
}

// `dlbench info` (fingerprint_text) prints each GPU's peaks with their clocks: an H100 SXM entry as
// the fingerprint would hold it on that machine.
TEST(GpuPeaks, InfoTextNamesThePeaksAndTheirClocks) {
  nlohmann::json fp = dlb::harness::fingerprint();
  const GpuInfo h100 = gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, 128);
  fp["cuda"]["available"] = true;
  fp["cuda"]["gpus"] = {{{"index", 0}, {"name", h100.name}, {"compute_capability", "9.0"}, {"sms", 132},
                         {"sm_clock_mhz", 1980.0}, {"peak_fp32_gflops", h100.peak_fp32_gflops},
                         {"peak_mem_gb_per_s", 3352.3}, {"peaks", gpu_peaks_json(h100)}}};
  const std::string text = dlb::harness::fingerprint_text(fp);
  EXPECT_NE(text.find("bf16 989.4 TFLOP/s at 1830 MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("tf32 494.7 TFLOP/s at 1830 MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("fp32 66.9 TFLOP/s at 1980 MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("datasheet boost clock"), std::string::npos) << text;
}
