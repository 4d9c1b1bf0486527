// models/half.h: dispatch on the dtype to the kernels' casts.
#include "models/half.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/threads.h"

namespace dlb::models {

bool is_half(DType t) { return t == DType::fp16 || t == DType::bf16; }

void to_half(DType t, const float* src, std::uint16_t* dst, std::size_t n) {
  if (t == DType::bf16) return cpu::cast_fp32_to_bf16(src, dst, n);
  if (t == DType::fp16) return cpu::cast_fp32_to_fp16(src, dst, n);
  throw std::invalid_argument(std::string("to_half: ") + dtype_name(t) + " is not a 16-bit type");
}

void from_half(DType t, const std::uint16_t* src, float* dst, std::size_t n) {
  if (t == DType::bf16) return cpu::cast_bf16_to_fp32(src, dst, n);
  if (t == DType::fp16) return cpu::cast_fp16_to_fp32(src, dst, n);
  throw std::invalid_argument(std::string("from_half: ") + dtype_name(t) + " is not a 16-bit type");
}

std::vector<std::uint16_t> to_half(DType t, const std::vector<float>& x) {
  std::vector<std::uint16_t> h(x.size());
  to_half(t, x.data(), h.data(), x.size());
  return h;
}

namespace {
void round_serial(DType t, float* x, std::size_t n) {
  switch (t) {
    case DType::bf16: return cpu::round_through_bf16(x, n);
    case DType::fp16: return cpu::round_through_fp16(x, n);
    case DType::tf32:
      // keep 10 of 23 mantissa bits, ties to even; NaN/inf untouched (the carry logic of bf16)
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u = cpu::f32_bits(x[i]);
        if ((u & 0x7F800000u) == 0x7F800000u) continue;
        u = (u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
        x[i] = cpu::f32_from_bits(u);
      }
      return;
    default: return;
  }
}
}  // namespace

void round_to(DType t, float* x, std::size_t n) {
  // Large arrays (a weight's gradient, the AMP step's parameters) in 128 KiB pieces over the kernel
  // threads: each element alone, so the bits do not depend on the split. Small ones (and a call from
  // inside a task) on the calling thread.
  constexpr std::size_t kPiece = 32768;
  if (t == DType::fp32 || n < 4 * kPiece || cpu::kernel_threads() == 1) return round_serial(t, x, n);
  cpu::parallel_tasks(int((n + kPiece - 1) / kPiece), [&](int i) {
    const std::size_t at = std::size_t(i) * kPiece;
    round_serial(t, x + at, std::min(kPiece, n - at));
  });
}

double max_finite(DType t) {
  switch (t) {
    case DType::fp16: return 65504.0;
    case DType::bf16: return double(cpu::bf16_to_fp32_ref(0x7F7F));
    case DType::fp64: return std::numeric_limits<double>::max();
    default: return std::numeric_limits<float>::max();
  }
}

}  // namespace dlb::models
