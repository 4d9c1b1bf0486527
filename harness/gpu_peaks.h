// GPU compute peaks for % of peak, each with the SM clock it assumes. FP32: the device properties'
// figure (SMs x FP32 lanes x 2 x the maximum SM clock, kernels/cuda/device_info.cpp), which is the
// clock NVIDIA's FP32 datasheet figures use (H100 SXM: 66.9 TFLOP/s at 1980 MHz). Tensor cores
// (tf32, fp16, bf16; dense): flop/clock/SM by architecture x SMs x the boost clock NVIDIA's tensor
// datasheet figures assume, which is lower than the maximum on Hopper (H100 SXM bf16: 989 TFLOP/s at
// 1830 MHz, not 1070 at 1980); a GPU not in the table falls back to the maximum clock (said so).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/common/device.h"

namespace dlb::harness {

struct GpuPeak {
  double gflops = 0;       // 0: unknown for this GPU and dtype
  double clock_mhz = 0;    // the SM clock the figure assumes
  std::string clock;       // where that clock comes from, in words
};

// Dense tensor-core flop per clock per SM (NVIDIA architecture whitepapers); 0 when not known.
double tensor_flops_per_clk_sm(int cc_major, int cc_minor, const std::string& dtype);
// The boost clock (MHz) NVIDIA's datasheet tensor-core figures assume for this GPU; 0 when not in
// the table (matched by compute capability, SM count and name).
double datasheet_tensor_clock_mhz(const GpuInfo& g);
// dtype fp32 | tf32 | fp16 | bf16.
GpuPeak gpu_peak(const GpuInfo& g, const std::string& dtype);
// {"fp32": {"gflops", "clock_mhz", "clock"}, "tf32": ..., "fp16": ..., "bf16": ...} (known ones only).
nlohmann::json gpu_peaks_json(const GpuInfo& g);

}  // namespace dlb::harness
