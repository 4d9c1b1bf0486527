// Half-type casts on the CPU: fp32 <-> bf16 and fp32 <-> fp16 (IEEE binary16), as raw 16-bit
// patterns. First the bit-exact scalar references (ours: integer arithmetic, round to nearest even,
// inf/NaN kept, subnormals kept, overflow to inf), then the bulk casts, which use AVX2 (bf16) and
// F16C (fp16) when the CPU has them and fall back to the references otherwise. The tests check the
// fast paths against the references bit for bit. models/half.h is the API the models use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dlb::cpu {

inline std::uint32_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- bf16: the top 16 bits of an fp32 (same 8-bit exponent, 7 stored mantissa bits) ----

inline float bf16_to_fp32_ref(std::uint16_t h) { return f32_from_bits(std::uint32_t(h) << 16); }

inline std::uint16_t fp32_to_bf16_ref(float f) {
  const std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN stays NaN (quiet)
  // Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit, then truncate. A carry
  // out of the mantissa bumps the exponent, which is right (and turns max-finite+ into inf).
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; max finite 65504, min normal 2^-14,
// min subnormal 2^-24 ----

inline float fp16_to_fp32_ref(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return f32_from_bits(sign | 0x7F800000u | (m << 13));  // inf / NaN (payload kept)
  if (e == 0) {                                                          // zero / subnormal: m * 2^-24, exact in fp32
    const float v = static_cast<float>(m) * 0x1p-24f;
    return f32_from_bits(sign | f32_bits(v));
  }
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));  // rebias 15 -> 127
}

inline std::uint16_t fp32_to_fp16_ref(float f) {
  const std::uint32_t u = f32_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u | static_cast<std::uint16_t>((a >> 13) & 0x3FFu);  // quiet NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 (halfway 65504..65536, tie -> even = 2^16): inf
  if (a < 0x38800000u) {                        // below 2^-14: an fp16 subnormal or zero
    if (a <= 0x33000000u) return sign;          // <= 2^-25: rounds to zero (2^-25 is a tie -> even 0)
    const std::uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126u - e;       // value / 2^-24 = m * 2^(e-126); shift in [14, 24]
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal: right
    return sign | static_cast<std::uint16_t>(r);
  }
  std::uint32_t r = (a >> 13) - (112u << 10);  // rebias 127 -> 15, keep 10 mantissa bits
  const std::uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry may reach 0x7C00 = inf: right
  return sign | static_cast<std::uint16_t>(r);
}

// ---- bulk casts (fast paths; identical bits to the references) ----
void cast_fp32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n);
void cast_bf16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n);
void cast_fp32_to_fp16(const float* src, std::uint16_t* dst, std::size_t n);
void cast_fp16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n);
// x[i] = fp32(bf16(x[i])) / fp32(fp16(x[i])) in place: the value a half-type tensor would hold.
void round_through_bf16(float* x, std::size_t n);
void round_through_fp16(float* x, std::size_t n);

// Which path the bulk casts take on this CPU: "avx2" / "f16c" or "scalar".
std::string bf16_cast_path();
std::string fp16_cast_path();

}  // namespace dlb::cpu
