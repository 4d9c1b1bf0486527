// Vector-width traits for the CPU kernels written once over the width (ggml's simd-mappings, as
// types): struct Avx2 (8 floats a __m256) and struct Avx512 (16 floats a __m512), each with the
// same operations. A kernel body is a template over V, compiled once per ISA between
//   #pragma GCC push_options / #pragma GCC target(DLB_TARGET_AVX2 or DLB_TARGET_AVX512)
// (GCC inlines an always_inline intrinsic only into a function of the same target, and a template
// cannot carry a target attribute of its own: the pragma gives every instance in the region its
// target). See kernels/cpu/conv2d/direct.cpp.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>

#define DLB_TARGET_AVX2 "avx2,fma"
#define DLB_TARGET_AVX512 "avx512f,avx512vl,avx512bw,avx512dq,fma"

namespace dlb::cpu::simd {

#define DLB_SIMD_AVX2 __attribute__((target(DLB_TARGET_AVX2), always_inline)) static inline
#define DLB_SIMD_AVX512 __attribute__((target(DLB_TARGET_AVX512), always_inline)) static inline

struct Avx2 {
  using vec = __m256;
  static constexpr int L = 8;  // floats a vector
  DLB_SIMD_AVX2 vec zero() { return _mm256_setzero_ps(); }
  DLB_SIMD_AVX2 vec load(const float* p) { return _mm256_loadu_ps(p); }
  DLB_SIMD_AVX2 void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  DLB_SIMD_AVX2 vec bcast(const float* p) { return _mm256_broadcast_ss(p); }
  DLB_SIMD_AVX2 vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }  // a*b + c
};

struct Avx512 {
  using vec = __m512;
  static constexpr int L = 16;
  DLB_SIMD_AVX512 vec zero() { return _mm512_setzero_ps(); }
  DLB_SIMD_AVX512 vec load(const float* p) { return _mm512_loadu_ps(p); }
  DLB_SIMD_AVX512 void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  DLB_SIMD_AVX512 vec bcast(const float* p) { return _mm512_set1_ps(*p); }
  DLB_SIMD_AVX512 vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
};

#undef DLB_SIMD_AVX2
#undef DLB_SIMD_AVX512

}  // namespace dlb::cpu::simd
#endif
