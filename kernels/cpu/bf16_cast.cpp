// Bulk half-type casts (see bf16_cast.h): scalar references as the fallback, AVX2 for bf16 and F16C
// for fp16, chosen at run time so the binary runs on any x86-64. Bandwidth-bound: 6 bytes per
// element (4 read + 2 written), so a cast of n floats costs about 6n / memory bandwidth.
#include "kernels/cpu/bf16_cast.h"

#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/isa.h"

namespace dlb::cpu {

namespace {

// Both under the DLB_CPU_ISA cap (isa.h): every CPU at level avx2 has F16C too.
bool has_avx2() { return isa_allows(Isa::avx2); }
bool has_f16c() {
  // CPUID leaf 1, ECX bit 29: clang (14) has no "f16c" for __builtin_cpu_supports.
  static const bool v = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx");
  }();
  return v && isa_allows(Isa::avx2);
}

// 8 floats -> 8 bf16, same arithmetic as fp32_to_bf16_ref.
__attribute__((target("avx2"))) inline __m128i bf16_pack8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  // NaN: |u| > 0x7F800000 (signed compare is fine, both sides are non-negative)
  const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i is_nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7F800000));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
  // 32 -> 16 bit: values are <= 0xFFFF so unsigned saturation is exact; packus works per 128-bit
  // lane, so gather the two lanes' results afterwards.
  const __m256i packed = _mm256_packus_epi32(r, r);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

__attribute__((target("avx2"))) void fp32_to_bf16_avx2(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), bf16_pack8(_mm256_loadu_ps(s + i)));
  for (; i < n; ++i) d[i] = fp32_to_bf16_ref(s[i]);
}

__attribute__((target("avx2"))) void bf16_to_fp32_avx2(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_ps(d + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) d[i] = bf16_to_fp32_ref(s[i]);
}

__attribute__((target("avx2"))) void round_bf16_avx2(float* x, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(bf16_pack8(_mm256_loadu_ps(x + i)));
    _mm256_storeu_ps(x + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) x[i] = bf16_to_fp32_ref(fp32_to_bf16_ref(x[i]));
}

// F16C's vcvtps2ph with round-to-nearest-even: RNE, subnormals, overflow to inf, NaN -> quiet NaN
// with the top payload bits, exactly like fp32_to_fp16_ref (the tests check it).
__attribute__((target("avx,f16c"))) void fp32_to_fp16_f16c(const float* s, std::uint16_t* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = fp32_to_fp16_ref(s[i]);
}

__attribute__((target("avx,f16c"))) void fp16_to_fp32_f16c(const std::uint16_t* s, float* d, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = fp16_to_fp32_ref(s[i]);
}

__attribute__((target("avx,f16c"))) void round_fp16_f16c(float* x, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  for (; i < n; ++i) x[i] = fp16_to_fp32_ref(fp32_to_fp16_ref(x[i]));
}

}  // namespace

void cast_fp32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n) {
  if (has_avx2()) return fp32_to_bf16_avx2(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16_ref(src[i]);
}

void cast_bf16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n) {
  if (has_avx2()) return bf16_to_fp32_avx2(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32_ref(src[i]);
}

void cast_fp32_to_fp16(const float* src, std::uint16_t* dst, std::size_t n) {
  if (has_f16c()) return fp32_to_fp16_f16c(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16_ref(src[i]);
}

void cast_fp16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n) {
  if (has_f16c()) return fp16_to_fp32_f16c(src, dst, n);
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32_ref(src[i]);
}

void round_through_bf16(float* x, std::size_t n) {
  if (has_avx2()) return round_bf16_avx2(x, n);
  for (std::size_t i = 0; i < n; ++i) x[i] = bf16_to_fp32_ref(fp32_to_bf16_ref(x[i]));
}

void round_through_fp16(float* x, std::size_t n) {
  if (has_f16c()) return round_fp16_f16c(x, n);
  for (std::size_t i = 0; i < n; ++i) x[i] = fp16_to_fp32_ref(fp32_to_fp16_ref(x[i]));
}

std::string bf16_cast_path() { return has_avx2() ? "avx2" : "scalar"; }
std::string fp16_cast_path() { return has_f16c() ? "f16c" : "scalar"; }

}  // namespace dlb::cpu
