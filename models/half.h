// Half types for the models: fp32 <-> bf16 / fp16 conversions (round to nearest even, inf/NaN and
// subnormals kept, overflow to inf). The bit-exact scalar references and the vectorised bulk casts
// live in kernels/cpu/bf16_cast.h (so kernels can use them too); this is the models' API on top.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"

namespace dlb::models {

// Scalar, bit-exact (the references).
inline std::uint16_t to_bf16(float f) { return cpu::fp32_to_bf16_ref(f); }
inline float from_bf16(std::uint16_t h) { return cpu::bf16_to_fp32_ref(h); }
inline std::uint16_t to_fp16(float f) { return cpu::fp32_to_fp16_ref(f); }
inline float from_fp16(std::uint16_t h) { return cpu::fp16_to_fp32_ref(h); }

bool is_half(DType t);  // fp16 or bf16

// Bulk (fast paths). `t` must be fp16 or bf16 (std::invalid_argument otherwise).
void to_half(DType t, const float* src, std::uint16_t* dst, std::size_t n);
void from_half(DType t, const std::uint16_t* src, float* dst, std::size_t n);
std::vector<std::uint16_t> to_half(DType t, const std::vector<float>& x);

// x[i] <- the value a tensor of dtype t would hold. fp32 leaves x alone; tf32 rounds the mantissa
// to 10 bits (nearest even), as tensor cores see fp32 inputs in TF32 mode; fp16/bf16 round-trip.
// Over the kernel threads from 128 K values on (the same bits).
void round_to(DType t, float* x, std::size_t n);

// Largest finite value of t (fp16 65504, bf16 ~3.39e38, fp32/tf32 ~3.40e38).
double max_finite(DType t);

}  // namespace dlb::models
