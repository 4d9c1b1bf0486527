// Tests for harness/records: the throughput keys of an entry and the Google Benchmark counter beside
// each (items_per_second for GFLOP/s and images/s, bytes_per_second for GB/s), the metric table the
// exports read units from, and % of peak.
#include <gtest/gtest.h>

#include <string>

#include "harness/records.h"
#include "kernels/cpu/isa.h"

using json = nlohmann::json;
using namespace dlb::harness;

TEST(Records, ThroughputCarriesItsStandardCounter) {
  // 2 GFLOP in 0.5 s: 4 GFLOP/s = 4e9 items_per_second; no bytes_per_second (Conbench would take it first).
  json g;
  add_throughput(g, 0.5, 2e9, 1e6, 0, "gflops", 8.0);
  EXPECT_DOUBLE_EQ(g.at("gflops").get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(g.at("items_per_second").get<double>(), 4e9);
  EXPECT_FALSE(g.contains("bytes_per_second"));
  EXPECT_DOUBLE_EQ(g.at("pct_of_peak").get<double>(), 50.0);

  // 64 images in 0.016 s, 1 GFLOP: 4000 images/s as items_per_second, GFLOP/s beside it.
  json t;
  add_throughput(t, 0.016, 1e9, 0, 64, "imgs_per_s", 0);
  EXPECT_DOUBLE_EQ(t.at("imgs_per_s").get<double>(), 4000.0);
  EXPECT_DOUBLE_EQ(t.at("items_per_second").get<double>(), 4000.0);
  EXPECT_TRUE(t.contains("gflops"));
  EXPECT_FALSE(t.contains("pct_of_peak"));

  // A copy of 1 GB in 0.1 s: 10 GB/s = 1e10 bytes_per_second.
  json c;
  add_throughput(c, 0.1, 0, 1e9, 0, "gb_per_s", 0);
  EXPECT_DOUBLE_EQ(c.at("bytes_per_second").get<double>(), 1e10);
  EXPECT_FALSE(c.contains("items_per_second"));

  json none;
  add_throughput(none, 0, 1, 1, 1, "gflops", 0);  // no time: nothing
  EXPECT_TRUE(none.empty());
}

TEST(Records, MetricTable) {
  for (const char* k : {"gflops", "gb_per_s", "imgs_per_s"}) {
    ASSERT_NE(metric_info(k), nullptr) << k;
    EXPECT_EQ(std::string(metric_info(k)->key), k);
  }
  EXPECT_EQ(metric_info("items_per_second"), nullptr);
  // The headline of an entry: images/s before GB/s before GFLOP/s.
  EXPECT_STREQ(entry_metric({{"gflops", 1.0}, {"imgs_per_s", 2.0}})->key, "imgs_per_s");
  EXPECT_STREQ(entry_metric({{"gflops", 1.0}, {"gb_per_s", 2.0}})->key, "gb_per_s");
  EXPECT_STREQ(entry_metric({{"gflops", 1.0}})->key, "gflops");
  EXPECT_EQ(entry_metric({{"gflops", "fast"}}), nullptr);
  EXPECT_EQ(entry_metric(json::object()), nullptr);
}

TEST(Records, CpuBf16CeilingIsTheOneTheRowRanOn) {
  // A CPU bf16 row's % of peak is taken against twice the FMA peak only where it ran on bf16 dot
  // products: ours (and oneDNN) at the avx512_bf16 level, or a PyTorch peer on a CPU that has it.
  // Under DLB_CPU_ISA=avx512 (the IsaLimit here) ours widens bf16 to fp32 FMAs: the FMA peak.
  Peaks peaks;
  peaks.cpu_fp32_gflops = 100;
  const bool has_bf16 = dlb::cpu::isa_detected() >= dlb::cpu::Isa::avx512_bf16;
  const bool ours_bf16 = dlb::cpu::isa_active() >= dlb::cpu::Isa::avx512_bf16;  // DLB_CPU_ISA may cap it
  auto entry = [](const char* dtype, const char* impl) {
    return base_entry(dlb::bench::CaseId{"gpt2", "train", "cpu", dtype, {}}.with("impl", impl), 0);
  };
  EXPECT_DOUBLE_EQ(peak_for(entry("fp32", "ours"), "gflops", peaks), 100);
  EXPECT_DOUBLE_EQ(peak_for(entry("bf16", "ours"), "gflops", peaks), ours_bf16 ? 200 : 100);
  EXPECT_DOUBLE_EQ(peak_for(entry("bf16", "pytorch"), "gflops", peaks), has_bf16 ? 200 : 100);
  {
    dlb::cpu::IsaLimit cap(dlb::cpu::Isa::avx512);
    const json ours = entry("bf16", "ours"), peer = entry("bf16", "pytorch-compile");
    EXPECT_EQ(ours.at("cpu_isa"), dlb::cpu::isa_name(dlb::cpu::isa_active()));
    EXPECT_DOUBLE_EQ(peak_for(ours, "gflops", peaks), 100);
    EXPECT_FALSE(cpu_bf16_native_row(ours));
    EXPECT_DOUBLE_EQ(peak_for(peer, "gflops", peaks), has_bf16 ? 200 : 100);  // not capped by DLB_CPU_ISA
  }
  EXPECT_DOUBLE_EQ(peak_for(entry("fp16", "ours"), "gflops", peaks), 0);  // no CPU ceiling known
}
