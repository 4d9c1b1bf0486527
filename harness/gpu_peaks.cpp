// GPU compute peaks and the clocks they assume (see gpu_peaks.h).
#include "harness/gpu_peaks.h"

namespace dlb::harness {

double tensor_flops_per_clk_sm(int cc_major, int cc_minor, const std::string& dtype) {
  const bool half = dtype == "fp16" || dtype == "bf16";
  if (cc_major == 9 && cc_minor == 0) return half ? 4096 : dtype == "tf32" ? 2048 : 0;  // Hopper
  if (cc_major == 8 && cc_minor == 0) return half ? 2048 : dtype == "tf32" ? 1024 : 0;  // A100
  return 0;
}

double datasheet_tensor_clock_mhz(const GpuInfo& g) {
  auto has = [&](const char* s) { return g.name.find(s) != std::string::npos; };
  // Datasheet dense bf16 / (SMs x flop/clk/SM): H100 SXM5, H200 SXM and GH200 989.4 TF / (132 x 4096)
  // = 1830 MHz; H100 PCIe 756 TF / (114 x 4096) = 1620 MHz; A100 312 TF / (108 x 2048) = 1410 MHz.
  if (g.cc_major == 9 && g.cc_minor == 0) {
    if (has("NVL")) return 0;  // not in the table
    if (g.sms == 132 && (has("H100") || has("H200") || has("GH200"))) return 1830;
    if (g.sms == 114 && has("H100") && has("PCIe")) return 1620;
  }
  if (g.cc_major == 8 && g.cc_minor == 0 && has("A100") && g.sms == 108) return 1410;
  return 0;
}

GpuPeak gpu_peak(const GpuInfo& g, const std::string& dtype) {
  GpuPeak p;
  if (dtype == "fp32") {
    p.gflops = g.peak_fp32_gflops;
    p.clock_mhz = g.sm_clock_mhz;
    p.clock = "maximum SM clock (device properties), the clock of NVIDIA's FP32 datasheet figures";
    return p;
  }
  const double per_clk = tensor_flops_per_clk_sm(g.cc_major, g.cc_minor, dtype);
  if (!(per_clk > 0)) return p;
  const double ds = datasheet_tensor_clock_mhz(g);
  p.clock_mhz = ds > 0 ? ds : g.sm_clock_mhz;
  p.clock = ds > 0 ? "datasheet boost clock of the tensor-core figures"
                   : "maximum SM clock (device properties; no datasheet clock known for this GPU: an upper bound)";
  p.gflops = per_clk * g.sms * p.clock_mhz * 1e-3;
  return p;
}

nlohmann::json gpu_peaks_json(const GpuInfo& g) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* d : {"fp32", "tf32", "fp16", "bf16"}) {
    const GpuPeak p = gpu_peak(g, d);
    if (p.gflops > 0) j[d] = {{"gflops", p.gflops}, {"clock_mhz", p.clock_mhz}, {"clock", p.clock}};
  }
  return j;
}

}  // namespace dlb::harness
