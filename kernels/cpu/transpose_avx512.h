// 16 x 16 floats (or int32 bit patterns) transposed in AVX-512 registers, shared by the conv and
// pool kernels (conv2d.cpp, nn_ops.cpp). x86-64 only; the callers are compiled for AVX-512 through
// target attributes, so this header needs no -mavx512f of its own.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace dlb::cpu {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's unpack intrinsics (an undefined vector inside)
#endif
// r[i] lane j -> r[j] lane i, in 64 shuffles (4 stages of 16): pairs of rows interleaved within
// each 128-bit block, then quads (block L of r[4k + m]: rows 4k..4k+3 of column 4L + m), then the
// 128-bit blocks gathered across the quads.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 u0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), u1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
    const __m512 v0 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
    t[m] = _mm512_shuffle_f32x4(u0, v0, 0x88);
    t[4 + m] = _mm512_shuffle_f32x4(u1, v1, 0x88);
    t[8 + m] = _mm512_shuffle_f32x4(u0, v0, 0xDD);
    t[12 + m] = _mm512_shuffle_f32x4(u1, v1, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace dlb::cpu
#endif
