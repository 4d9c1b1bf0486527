// Vector-width traits for the CPU kernels written once over the width (ggml's simd-mappings, as
// types): struct Avx2 (8 floats a __m256) and struct Avx512 (16 floats a __m512), each with the
// same operations. A kernel body is a template over V, compiled once per ISA between
//   #pragma GCC push_options / #pragma GCC target(DLB_TARGET_AVX2 or DLB_TARGET_AVX512)
// (GCC inlines an always_inline intrinsic only into a function of the same target, and a template
// cannot carry a target attribute of its own: the pragma gives every instance in the region its
// target). See kernels/cpu/conv2d/direct.cpp.
// struct Scalar (1 float, plain C++) has the same operations, so a body also compiles for the
// scalar ISA level. Beyond the FMA core: arithmetic, compare + select, masked tails (load_n /
// store_n), horizontal sums and maxima, and ldexp; kernels/cpu/seq/vmath.inc builds exp, tanh and
// sigmoid on them, once over V. And a few 32-bit integer lane operations (ivec) for Philox, and
// an L x L tile transpose (the conv kernels' layout changes, kernels/cpu/conv2d/bwd_data_cols.inc).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/transpose_avx512.h"
#endif

namespace dlb::cpu::simd {

struct Scalar {
  using vec = float;
  using mask = bool;
  static constexpr int L = 1;
  static inline vec zero() { return 0.f; }
  static inline vec set1(float x) { return x; }
  static inline vec load(const float* p) { return *p; }
  static inline void store(float* p, vec v) { *p = v; }
  static inline vec bcast(const float* p) { return *p; }
  static inline vec fma(vec a, vec b, vec c) { return a * b + c; }
  static inline vec add(vec a, vec b) { return a + b; }
  static inline vec sub(vec a, vec b) { return a - b; }
  static inline vec mul(vec a, vec b) { return a * b; }
  static inline vec div(vec a, vec b) { return a / b; }
  static inline vec max(vec a, vec b) { return a > b ? a : b; }
  static inline vec min(vec a, vec b) { return a < b ? a : b; }
  static inline vec abs(vec a) { return std::fabs(a); }
  static inline vec sqrt(vec a) { return std::sqrt(a); }
  static inline mask lt(vec a, vec b) { return a < b; }
  static inline vec select(mask m, vec a, vec b) { return m ? a : b; }  // m ? a : b per lane
  static inline vec round(vec a) { return std::nearbyint(a); }         // to nearest even
  static inline vec ldexp(vec a, vec n) { return std::ldexp(a, int(n)); }  // a * 2^n, n integral, normal range
  static inline vec load_n(const float* p, int n, float fill) { return n > 0 ? *p : fill; }  // lanes >= n: fill
  static inline void store_n(float* p, vec v, int n) {
    if (n > 0) *p = v;
  }
  static inline float reduce_add(vec v) { return v; }
  static inline float reduce_max(vec v) { return v; }
  // 32-bit unsigned lanes (the Philox generator, kernels/cpu/seq/dropout.cpp)
  using ivec = std::uint32_t;
  static inline ivec iset1(std::uint32_t x) { return x; }
  static inline ivec iota(std::uint32_t base) { return base; }  // lanes base, base + 1, ...
  static inline ivec ixor(ivec a, ivec b) { return a ^ b; }
  static inline void mulhilo(ivec a, std::uint32_t m, ivec& hi, ivec& lo) {  // a * m, 64-bit, split
    const std::uint64_t r = std::uint64_t(a) * m;
    hi = std::uint32_t(r >> 32), lo = std::uint32_t(r);
  }
  static inline vec uniform(ivec w) { return float(w >> 8) * (1.0f / 16777216.0f); }  // philox_uniform
  // An L x L tile transposed: dst[j*ldd + i] = src[i*lds + j] for rows i < nr, columns j < nc (src
  // rows beyond nr read as zeros, columns beyond nc are not read; dst gets nr floats a row).
  static inline void transpose_tile(const float* src, std::size_t lds, int nr, int nc, float* dst, std::size_t ldd) {
    (void)lds, (void)ldd;
    if (nr > 0 && nc > 0) *dst = *src;
  }
  // The conv col GEMMs (conv2d/col_gemm.inc): four lane sums added at once, s[0..3] += {sum a,
  // sum b, sum c, sum d}.
  static inline void reduce_add4(vec a, vec b, vec c, vec d, float* s) { s[0] += a, s[1] += b, s[2] += c, s[3] += d; }
};

}  // namespace dlb::cpu::simd

#if defined(__x86_64__)

#define DLB_TARGET_AVX2 "avx2,fma"
#define DLB_TARGET_AVX512 "avx512f,avx512vl,avx512bw,avx512dq,fma"

namespace dlb::cpu::simd {

#define DLB_SIMD_AVX2 __attribute__((target(DLB_TARGET_AVX2), always_inline)) static inline
#define DLB_SIMD_AVX512 __attribute__((target(DLB_TARGET_AVX512), always_inline)) static inline

struct Avx2 {
  using vec = __m256;
  using mask = __m256;  // all-ones lanes
  static constexpr int L = 8;  // floats a vector
  DLB_SIMD_AVX2 vec zero() { return _mm256_setzero_ps(); }
  DLB_SIMD_AVX2 vec set1(float x) { return _mm256_set1_ps(x); }
  DLB_SIMD_AVX2 vec load(const float* p) { return _mm256_loadu_ps(p); }
  DLB_SIMD_AVX2 void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  DLB_SIMD_AVX2 vec bcast(const float* p) { return _mm256_broadcast_ss(p); }
  DLB_SIMD_AVX2 vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }  // a*b + c
  DLB_SIMD_AVX2 vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  DLB_SIMD_AVX2 vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  DLB_SIMD_AVX2 vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  DLB_SIMD_AVX2 vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
  DLB_SIMD_AVX2 vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  DLB_SIMD_AVX2 vec min(vec a, vec b) { return _mm256_min_ps(a, b); }
  DLB_SIMD_AVX2 vec abs(vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  DLB_SIMD_AVX2 vec sqrt(vec a) { return _mm256_sqrt_ps(a); }
  DLB_SIMD_AVX2 mask lt(vec a, vec b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  DLB_SIMD_AVX2 vec select(mask m, vec a, vec b) { return _mm256_blendv_ps(b, a, m); }
  DLB_SIMD_AVX2 vec round(vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  DLB_SIMD_AVX2 vec ldexp(vec a, vec n) {  // n integral in [-126, 127]: build 2^n's exponent field
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(a, _mm256_castsi256_ps(e));
  }
  DLB_SIMD_AVX2 __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  DLB_SIMD_AVX2 vec load_n(const float* p, int n, float fill) {  // masked lanes are not read
    const __m256i m = lanes_below(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  DLB_SIMD_AVX2 void store_n(float* p, vec v, int n) { _mm256_maskstore_ps(p, lanes_below(n), v); }
  DLB_SIMD_AVX2 float reduce_add(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  DLB_SIMD_AVX2 float reduce_max(vec v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  using ivec = __m256i;
  DLB_SIMD_AVX2 ivec iset1(std::uint32_t x) { return _mm256_set1_epi32(int(x)); }
  DLB_SIMD_AVX2 ivec iota(std::uint32_t base) {
    return _mm256_add_epi32(_mm256_set1_epi32(int(base)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  DLB_SIMD_AVX2 ivec ixor(ivec a, ivec b) { return _mm256_xor_si256(a, b); }
  // vpmuludq multiplies the even lanes (32 x 32 -> 64): once as they are, once shifted down.
  DLB_SIMD_AVX2 void mulhilo(ivec a, std::uint32_t m, ivec& hi, ivec& lo) {
    const __m256i mv = _mm256_set1_epi32(int(m));
    const __m256i even = _mm256_mul_epu32(a, mv), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mv);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  }
  DLB_SIMD_AVX2 vec uniform(ivec w) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), _mm256_set1_ps(1.0f / 16777216.0f));
  }
  // The 8 x 8 tile transpose (Scalar's contract): pairs of rows interleaved, then quads, then the
  // 128-bit halves swapped across; a full tile's rows load and store unmasked (vmaskmov is slow on AMD).
  DLB_SIMD_AVX2 void transpose_tile(const float* src, std::size_t lds, int nr, int nc, float* dst, std::size_t ldd) {
    const __m256i mc = lanes_below(nc), mr = lanes_below(nr);
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i)
      r[i] = i >= nr    ? _mm256_setzero_ps()
             : nc == 8 ? _mm256_loadu_ps(src + i * lds)
                       : _mm256_maskload_ps(src + i * lds, mc);
    for (int i = 0; i < 8; i += 2)
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
      r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
    for (int j = 0; j < nc; ++j)
      if (nr == 8) _mm256_storeu_ps(dst + j * ldd, r[j]);
      else _mm256_maskstore_ps(dst + j * ldd, mr, r[j]);
  }
  // The conv col GEMMs (conv2d/col_gemm.inc): as Scalar's. Two rounds of hadd and one add give
  // {sum a, sum b, sum c, sum d} in 5 instructions, against 4 x 6 for four reduce_add.
  DLB_SIMD_AVX2 void reduce_add4(vec a, vec b, vec c, vec d, float* s) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(s, _mm_add_ps(_mm_loadu_ps(s), _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1))));
  }
};

struct Avx512 {
  using vec = __m512;
  using mask = __mmask16;
  static constexpr int L = 16;
  DLB_SIMD_AVX512 vec zero() { return _mm512_setzero_ps(); }
  DLB_SIMD_AVX512 vec set1(float x) { return _mm512_set1_ps(x); }
  DLB_SIMD_AVX512 vec load(const float* p) { return _mm512_loadu_ps(p); }
  DLB_SIMD_AVX512 void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  DLB_SIMD_AVX512 vec bcast(const float* p) { return _mm512_set1_ps(*p); }
  DLB_SIMD_AVX512 vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  DLB_SIMD_AVX512 vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  DLB_SIMD_AVX512 vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  DLB_SIMD_AVX512 vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  DLB_SIMD_AVX512 vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  DLB_SIMD_AVX512 vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  DLB_SIMD_AVX512 vec min(vec a, vec b) { return _mm512_min_ps(a, b); }
  DLB_SIMD_AVX512 vec abs(vec a) { return _mm512_abs_ps(a); }
  DLB_SIMD_AVX512 vec sqrt(vec a) { return _mm512_sqrt_ps(a); }
  DLB_SIMD_AVX512 mask lt(vec a, vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  DLB_SIMD_AVX512 vec select(mask m, vec a, vec b) { return _mm512_mask_blend_ps(m, b, a); }
  DLB_SIMD_AVX512 vec round(vec a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  DLB_SIMD_AVX512 vec ldexp(vec a, vec n) { return _mm512_scalef_ps(a, n); }
  DLB_SIMD_AVX512 mask lanes_below(int n) { return n >= 16 ? mask(0xFFFF) : mask((1u << (n > 0 ? n : 0)) - 1); }
  DLB_SIMD_AVX512 vec load_n(const float* p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), lanes_below(n), p);
  }
  DLB_SIMD_AVX512 void store_n(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, lanes_below(n), v); }
  DLB_SIMD_AVX512 float reduce_add(vec v) { return _mm512_reduce_add_ps(v); }
  DLB_SIMD_AVX512 float reduce_max(vec v) { return _mm512_reduce_max_ps(v); }
  using ivec = __m512i;
  DLB_SIMD_AVX512 ivec iset1(std::uint32_t x) { return _mm512_set1_epi32(int(x)); }
  DLB_SIMD_AVX512 ivec iota(std::uint32_t base) {
    return _mm512_add_epi32(_mm512_set1_epi32(int(base)),
                            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  }
  DLB_SIMD_AVX512 ivec ixor(ivec a, ivec b) { return _mm512_xor_si512(a, b); }
  DLB_SIMD_AVX512 void mulhilo(ivec a, std::uint32_t m, ivec& hi, ivec& lo) {  // as Avx2's
    const __m512i mv = _mm512_set1_epi32(int(m));
    const __m512i even = _mm512_mul_epu32(a, mv), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mv);
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  }
  DLB_SIMD_AVX512 vec uniform(ivec w) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), _mm512_set1_ps(1.0f / 16777216.0f));
  }
  // The 16 x 16 tile transpose (Scalar's contract), through transpose16x16 (transpose_avx512.h).
  DLB_SIMD_AVX512 void transpose_tile(const float* src, std::size_t lds, int nr, int nc, float* dst, std::size_t ldd) {
    const mask mc = lanes_below(nc), mr = lanes_below(nr);
    __m512 a[16];
    for (int i = 0; i < 16; ++i) a[i] = i < nr ? _mm512_maskz_loadu_ps(mc, src + i * lds) : _mm512_setzero_ps();
    transpose16x16(a);
    for (int j = 0; j < nc; ++j) _mm512_mask_storeu_ps(dst + j * ldd, mr, a[j]);
  }
  // The conv col GEMMs (conv2d/col_gemm.inc): as Scalar's, in 13 instructions against 4 x 8 for
  // four reduce_add (a 75 x 128 dW is 9600 lane sums per image). Per 128-bit lane, unpacks give
  // {a0+a2, b0+b2, a1+a3, b1+b3} (and c, d), then {a, b, c, d} partial sums; the 4 lanes are added.
  DLB_SIMD_AVX512 void reduce_add4(vec a, vec b, vec c, vec d, float* s) {
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const __m512 s4 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                    _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s4), _mm512_extractf32x8_ps(s4, 1));
    _mm_storeu_ps(s, _mm_add_ps(_mm_loadu_ps(s), _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1))));
  }
};

#undef DLB_SIMD_AVX2
#undef DLB_SIMD_AVX512

}  // namespace dlb::cpu::simd
#endif
