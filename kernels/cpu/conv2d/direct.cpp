// Direct AVX2 / AVX-512 kernels: forward and backward-filter for few output channels.
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {

// ---------------------------------------------------------------------------------------------
// Fast paths: direct AVX2 kernels for convolutions with few output channels (the lecture's conv2,
// 128 -> 16 channels 5x5). There im2col blows each image up R*S = 25 times (1.3 MB) only for a GEMM
// 16 rows deep, and the copy, not the FMAs, is the cost (~35 GFLOP/s against OpenBLAS's ~75 on
// good shapes). These kernels read x in place: 8 or 16 output channels in one or two vector
// registers, times a run of up to 6 output pixels of one row, accumulated over c, r, s.
// Napkin math (forward, per tap): 2 filter loads + 6 broadcasts for 12 FMAs (192 flops), so the
// FMA ports, not the loads, set the pace. Backward-filter is the same loop with dy in the filter's
// place. Stride 1, no padding, k a multiple of 8, CPUs with AVX2 + FMA; other shapes use im2col.
// ---------------------------------------------------------------------------------------------
// wt[((c*R + r)*S + s)*K + k] = w[k][c][r][s]: one tap's K filter values are contiguous.
// (Written in order, read in K streams: each write a new cache line the other way round.)
void filters_to_crsk(const Conv2dShape& sh, const float* w, float* wt) {
  const std::size_t CRS = std::size_t(sh.c) * sh.r * sh.s;
  const int K = sh.k;
  for (std::size_t i = 0; i < CRS; ++i)
    for (int k = 0; k < K; ++k) wt[i * K + k] = w[k * CRS + i];
}

// NP output pixels (a run of one row) x 8*NV output channels, summed over every c, s and the taps
// r in [r0, r1) (the others read zero padding). x: the (padded) image at (row p, column q0), rows
// of `ld` floats, planes of `plane`; wt: the CRSK filters at channel k0; out[NP][8*NV].
template <int NP, int NV>
DLB_AVX2_FMA_INLINE void forward_direct_block(const float* x, std::size_t plane, int ld, int r0, int r1, const float* wt,
                                              const Conv2dShape& sh, float* out) {
  static_assert(NP >= 1 && NP <= 6 && (NV == 1 || NV == 2), "block: up to 6 pixels x 16 channels");
  // Named accumulators, not an array: GCC keeps an array of vectors on the stack here (a store
  // after every FMA pair, at half the speed).
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  const int K = sh.k, S = sh.s, C = sh.c, nr = r1 - r0;
  const std::size_t wc = std::size_t(sh.r) * S * K;  // filter floats per input channel
  x += std::size_t(r0) * ld;
  wt += std::size_t(r0) * S * K;
  for (int c = 0; c < C; ++c, x += plane, wt += wc) {
    const float* xr = x;
    const float* wr = wt;
    for (int r = 0; r < nr; ++r, xr += ld, wr += S * K)
      for (int s = 0; s < S; ++s) {
        const __m256 f0 = _mm256_loadu_ps(wr + s * K);
        const __m256 f1 = NV > 1 ? _mm256_loadu_ps(wr + s * K + 8) : f0;
#define DLB_FMA_PIXEL(i)                                        \
  if constexpr (NP > i) {                                       \
    const __m256 xb = _mm256_broadcast_ss(xr + i + s);          \
    a##i##0 = _mm256_fmadd_ps(f0, xb, a##i##0);                 \
    if constexpr (NV > 1) a##i##1 = _mm256_fmadd_ps(f1, xb, a##i##1); \
  }
        DLB_FMA_PIXEL(0) DLB_FMA_PIXEL(1) DLB_FMA_PIXEL(2) DLB_FMA_PIXEL(3) DLB_FMA_PIXEL(4) DLB_FMA_PIXEL(5)
#undef DLB_FMA_PIXEL
      }
  }
  const __m256 acc[6][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}};
  for (int i = 0; i < NP; ++i)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + i * 8 * NV + 8 * v, acc[i][v]);
}

template <int NV>
DLB_AVX2_FMA_INLINE void forward_direct_run(int np, const float* x, std::size_t plane, int ld, int r0, int r1,
                                     const float* wt, const Conv2dShape& sh, float* out) {
  switch (np) {
    case 1: return forward_direct_block<1, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 2: return forward_direct_block<2, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 3: return forward_direct_block<3, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 4: return forward_direct_block<4, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 5: return forward_direct_block<5, NV>(x, plane, ld, r0, r1, wt, sh, out);
    default: return forward_direct_block<6, NV>(x, plane, ld, r0, r1, wt, sh, out);
  }
}

// conv2d_forward_direct_avx2: images of `sh`, filters already in CRSK order (wt), y NCHW (+ bias).
// With padding, each image is first copied into a zero-bordered buffer (xpad, (h+2ph)*(w+2pw)*c
// floats); taps whose rows fall wholly in the border are skipped (a transposed conv's "full"
// padding would otherwise double the flops).
DLB_AVX2_FMA void conv2d_forward_direct_avx2(const Conv2dShape& sh, const float* x, const float* wt, const float* bias,
                                            float* y, float* xpad) {
  const int K = sh.k, P = sh.p(), Q = sh.q(), ph = sh.pad_h, pw = sh.pad_w;
  const int Hp = sh.h + 2 * ph, Wp = sh.w + 2 * pw;
  const std::size_t PQ = std::size_t(P) * Q, xi = std::size_t(sh.c) * sh.h * sh.w, plane = std::size_t(Hp) * Wp;
  const bool padded = ph > 0 || pw > 0;
  alignas(32) float out[6 * 16];
  for (int n = 0; n < sh.n; ++n) {
    const float* xn = x + n * xi;
    if (padded) {
      std::fill(xpad, xpad + plane * sh.c, 0.f);
      for (int c = 0; c < sh.c; ++c)
        for (int h = 0; h < sh.h; ++h)
          std::copy(xn + (std::size_t(c) * sh.h + h) * sh.w, xn + (std::size_t(c) * sh.h + h + 1) * sh.w,
                    xpad + c * plane + std::size_t(h + ph) * Wp + pw);
      xn = xpad;
    }
    for (int k0 = 0; k0 < K; k0 += 16) {
      const int nk = std::min(16, K - k0);
      for (int p = 0; p < P; ++p) {
        const int r0 = std::max(0, ph - p), r1 = std::min(sh.r, ph + sh.h - p);  // rows inside the image
        for (int q0 = 0; q0 < Q; q0 += 6) {
          const int np = std::min(6, Q - q0);
          const float* xb = xn + std::size_t(p) * Wp + q0;
          if (nk == 16) forward_direct_run<2>(np, xb, plane, Wp, r0, r1, wt + k0, sh, out);
          else forward_direct_run<1>(np, xb, plane, Wp, r0, r1, wt + k0, sh, out);
          float* yb = y + (std::size_t(n) * K + k0) * PQ + std::size_t(p) * Q + q0;
          for (int k = 0; k < nk; ++k) {
            const float b = bias ? bias[k0 + k] : 0.f;
            for (int i = 0; i < np; ++i) yb[k * PQ + i] = out[i * nk + k] + b;
          }
        }
      }
    }
  }
}

// ---- the forward direct kernel in AVX-512: 16 output channels per zmm, runs of up to 12 pixels.
// Napkin math (per tap, NV = 1, 10 pixels as conv2's rows): 1 filter load + 10 broadcasts for 10
// FMAs of 16 lanes (320 flops) against AVX2's 8 loads for 12 FMAs of 8 lanes (192 flops). NV = 2
// (32 channels: backward-data run as a forward conv with K = 128) shares each broadcast over 2 FMAs.
// Used when K is a multiple of 16 and DLB_CPU_ISA allows avx512; A/B against the AVX2 kernel in
// the conv suite with DLB_CPU_ISA=avx2.

template <int NP, int NV>
DLB_AVX512_INLINE void forward_direct_block512(const float* x, std::size_t plane, int ld, int r0, int r1,
                                               const float* wt, const Conv2dShape& sh, float* out) {
  static_assert(NP >= 1 && NP <= 12 && (NV == 1 || NV == 2), "block: up to 12 pixels x 32 channels");
  // Named accumulators (see forward_direct_block): 12 pixels x 2 vectors, 24 of the 32 zmm.
  __m512 a0_0 = _mm512_setzero_ps(), a0_1 = a0_0, a1_0 = a0_0, a1_1 = a0_0, a2_0 = a0_0, a2_1 = a0_0;
  __m512 a3_0 = a0_0, a3_1 = a0_0, a4_0 = a0_0, a4_1 = a0_0, a5_0 = a0_0, a5_1 = a0_0;
  __m512 a6_0 = a0_0, a6_1 = a0_0, a7_0 = a0_0, a7_1 = a0_0, a8_0 = a0_0, a8_1 = a0_0;
  __m512 a9_0 = a0_0, a9_1 = a0_0, a10_0 = a0_0, a10_1 = a0_0, a11_0 = a0_0, a11_1 = a0_0;
  const int K = sh.k, S = sh.s, C = sh.c, nr = r1 - r0;
  const std::size_t wc = std::size_t(sh.r) * S * K;
  x += std::size_t(r0) * ld;
  wt += std::size_t(r0) * S * K;
  for (int c = 0; c < C; ++c, x += plane, wt += wc) {
    const float* xr = x;
    const float* wr = wt;
    for (int r = 0; r < nr; ++r, xr += ld, wr += S * K)
      for (int s = 0; s < S; ++s) {
        const __m512 f0 = _mm512_loadu_ps(wr + s * K);
        const __m512 f1 = NV > 1 ? _mm512_loadu_ps(wr + s * K + 16) : f0;
#define DLB_FMA512(i)                                                  \
  if constexpr (NP > i) {                                              \
    const __m512 xb = _mm512_set1_ps(xr[i + s]);                       \
    a##i##_0 = _mm512_fmadd_ps(f0, xb, a##i##_0);                      \
    if constexpr (NV > 1) a##i##_1 = _mm512_fmadd_ps(f1, xb, a##i##_1); \
  }
        DLB_FMA512(0) DLB_FMA512(1) DLB_FMA512(2) DLB_FMA512(3) DLB_FMA512(4) DLB_FMA512(5)
        DLB_FMA512(6) DLB_FMA512(7) DLB_FMA512(8) DLB_FMA512(9) DLB_FMA512(10) DLB_FMA512(11)
#undef DLB_FMA512
      }
  }
  const __m512 acc[12][2] = {{a0_0, a0_1}, {a1_0, a1_1}, {a2_0, a2_1},   {a3_0, a3_1},   {a4_0, a4_1},   {a5_0, a5_1},
                             {a6_0, a6_1}, {a7_0, a7_1}, {a8_0, a8_1},   {a9_0, a9_1},   {a10_0, a10_1}, {a11_0, a11_1}};
  for (int i = 0; i < NP; ++i)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + i * 16 * NV + 16 * v, acc[i][v]);
}

template <int NV>
DLB_AVX512_INLINE void forward_direct_run512(int np, const float* x, std::size_t plane, int ld, int r0, int r1,
                                             const float* wt, const Conv2dShape& sh, float* out) {
  switch (np) {
    case 1: return forward_direct_block512<1, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 2: return forward_direct_block512<2, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 3: return forward_direct_block512<3, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 4: return forward_direct_block512<4, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 5: return forward_direct_block512<5, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 6: return forward_direct_block512<6, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 7: return forward_direct_block512<7, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 8: return forward_direct_block512<8, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 9: return forward_direct_block512<9, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 10: return forward_direct_block512<10, NV>(x, plane, ld, r0, r1, wt, sh, out);
    case 11: return forward_direct_block512<11, NV>(x, plane, ld, r0, r1, wt, sh, out);
    default: return forward_direct_block512<12, NV>(x, plane, ld, r0, r1, wt, sh, out);
  }
}

// conv2d_forward_direct_avx512: as conv2d_forward_direct_avx2, K a multiple of 16.
DLB_AVX512_T void conv2d_forward_direct_avx512(const Conv2dShape& sh, const float* x, const float* wt,
                                               const float* bias, float* y, float* xpad) {
  const int K = sh.k, P = sh.p(), Q = sh.q(), ph = sh.pad_h, pw = sh.pad_w;
  const int Hp = sh.h + 2 * ph, Wp = sh.w + 2 * pw;
  const std::size_t PQ = std::size_t(P) * Q, xi = std::size_t(sh.c) * sh.h * sh.w, plane = std::size_t(Hp) * Wp;
  const bool padded = ph > 0 || pw > 0;
  const int runs = (Q + 11) / 12, run = (Q + runs - 1) / runs;  // a row in near-equal runs of <= 12
  alignas(64) float out[12 * 32];
  for (int n = 0; n < sh.n; ++n) {
    const float* xn = x + n * xi;
    if (padded) {
      std::fill(xpad, xpad + plane * sh.c, 0.f);
      for (int c = 0; c < sh.c; ++c)
        for (int h = 0; h < sh.h; ++h)
          std::copy(xn + (std::size_t(c) * sh.h + h) * sh.w, xn + (std::size_t(c) * sh.h + h + 1) * sh.w,
                    xpad + c * plane + std::size_t(h + ph) * Wp + pw);
      xn = xpad;
    }
    for (int k0 = 0; k0 < K;) {
      const int nk = K - k0 >= 32 ? 32 : 16;
      for (int p = 0; p < P; ++p) {
        const int r0 = std::max(0, ph - p), r1 = std::min(sh.r, ph + sh.h - p);
        for (int q0 = 0; q0 < Q; q0 += run) {
          const int np = std::min(run, Q - q0);
          const float* xb = xn + std::size_t(p) * Wp + q0;
          if (nk == 32) forward_direct_run512<2>(np, xb, plane, Wp, r0, r1, wt + k0, sh, out);
          else forward_direct_run512<1>(np, xb, plane, Wp, r0, r1, wt + k0, sh, out);
          float* yb = y + (std::size_t(n) * K + k0) * PQ + std::size_t(p) * Q + q0;
          for (int k = 0; k < nk; ++k) {
            const float b = bias ? bias[k0 + k] : 0.f;
            for (int i = 0; i < np; ++i) yb[k * PQ + i] = out[i * nk + k] + b;
          }
        }
      }
      k0 += nk;
    }
  }
}

// The forward direct kernel: AVX-512 (K % 16 == 0) or AVX2.
void forward_direct(const Conv2dShape& sh, const float* x, const float* wt, const float* bias, float* y, float* xpad,
                    bool w512) {
  if (w512) return conv2d_forward_direct_avx512(sh, x, wt, bias, y, xpad);
  conv2d_forward_direct_avx2(sh, x, wt, bias, y, xpad);
}

// dW for one (c, r) and NS taps s0 .. s0+NS-1, 8*NV output channels, summed over the images and
// output pixels: dyt[n][p*Q + q][K] (dy with channels innermost), x the images. Adds into out[NS][8*NV].
template <int NS, int NV>
DLB_AVX2_FMA_INLINE void backward_filter_direct_block(const Conv2dShape& sh, const float* x, const float* dyt, int c,
                                                      int r, int s0, int k0, float* out) {
  static_assert(NS >= 1 && NS <= 5 && (NV == 1 || NV == 2), "block: up to 5 taps x 16 channels");
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00;
  const int K = sh.k, P = sh.p(), Q = sh.q(), W = sh.w, N = sh.n;
  const std::size_t xi = std::size_t(sh.c) * sh.h * W, PQ = std::size_t(P) * Q;
  for (int n = 0; n < N; ++n) {
    const float* xc = x + n * xi + std::size_t(c) * sh.h * W + std::size_t(r) * W + s0;
    const float* d = dyt + n * PQ * K + k0;
    for (int p = 0; p < P; ++p) {
      const float* xr = xc + std::size_t(p) * W;
      const float* dr = d + std::size_t(p) * Q * K;
      for (int q = 0; q < Q; ++q) {
        const __m256 g0 = _mm256_loadu_ps(dr + q * K);
        const __m256 g1 = NV > 1 ? _mm256_loadu_ps(dr + q * K + 8) : g0;
#define DLB_FMA_TAP(j)                                          \
  if constexpr (NS > j) {                                       \
    const __m256 xb = _mm256_broadcast_ss(xr + q + j);          \
    a##j##0 = _mm256_fmadd_ps(g0, xb, a##j##0);                 \
    if constexpr (NV > 1) a##j##1 = _mm256_fmadd_ps(g1, xb, a##j##1); \
  }
        DLB_FMA_TAP(0) DLB_FMA_TAP(1) DLB_FMA_TAP(2) DLB_FMA_TAP(3) DLB_FMA_TAP(4)
#undef DLB_FMA_TAP
      }
    }
  }
  const __m256 acc[5][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}};
  for (int j = 0; j < NS; ++j)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + j * 8 * NV + 8 * v, acc[j][v]);
}

template <int NV>
DLB_AVX2_FMA void backward_filter_direct_run(int ns, const Conv2dShape& sh, const float* x, const float* dyt, int c,
                                             int r, int s0, int k0, float* out) {
  switch (ns) {
    case 1: return backward_filter_direct_block<1, NV>(sh, x, dyt, c, r, s0, k0, out);
    case 2: return backward_filter_direct_block<2, NV>(sh, x, dyt, c, r, s0, k0, out);
    case 3: return backward_filter_direct_block<3, NV>(sh, x, dyt, c, r, s0, k0, out);
    case 4: return backward_filter_direct_block<4, NV>(sh, x, dyt, c, r, s0, k0, out);
    default: return backward_filter_direct_block<5, NV>(sh, x, dyt, c, r, s0, k0, out);
  }
}

// AVX-512 backward-filter: dW for one c, NR filter rows r0.. and NS taps s0.., 16 output channels
// (one zmm), summed over the images and output pixels: each dy vector feeds NR*NS FMAs (10 for
// 2 rows x 5 taps, as conv2's 5x5), against AVX2's 2 ymm feeding 10. Adds into out[NR*NS][16].
template <int NS, int NR>
DLB_AVX512_INLINE void backward_filter_direct_block512(const Conv2dShape& sh, const float* x, const float* dyt, int c,
                                                       int r, int s0, int k0, float* out) {
  static_assert(NS >= 1 && NS <= 5 && (NR == 1 || NR == 2), "block: up to 2 rows x 5 taps x 16 channels");
  __m512 a0_0 = _mm512_setzero_ps(), a1_0 = a0_0, a2_0 = a0_0, a3_0 = a0_0, a4_0 = a0_0;
  __m512 a0_1 = a0_0, a1_1 = a0_0, a2_1 = a0_0, a3_1 = a0_0, a4_1 = a0_0;
  const int K = sh.k, P = sh.p(), Q = sh.q(), W = sh.w, N = sh.n;
  const std::size_t xi = std::size_t(sh.c) * sh.h * W, PQ = std::size_t(P) * Q;
  for (int n = 0; n < N; ++n) {
    const float* xc = x + n * xi + std::size_t(c) * sh.h * W + std::size_t(r) * W + s0;
    const float* d = dyt + n * PQ * K + k0;
    for (int p = 0; p < P; ++p) {
      const float* xr = xc + std::size_t(p) * W;
      const float* xr1 = xr + W;
      const float* dr = d + std::size_t(p) * Q * K;
      for (int q = 0; q < Q; ++q) {
        const __m512 g = _mm512_loadu_ps(dr + q * K);
#define DLB_TAP512(j)                                                                     \
  if constexpr (NS > j) {                                                                 \
    a##j##_0 = _mm512_fmadd_ps(g, _mm512_set1_ps(xr[q + j]), a##j##_0);                   \
    if constexpr (NR > 1) a##j##_1 = _mm512_fmadd_ps(g, _mm512_set1_ps(xr1[q + j]), a##j##_1); \
  }
        DLB_TAP512(0) DLB_TAP512(1) DLB_TAP512(2) DLB_TAP512(3) DLB_TAP512(4)
#undef DLB_TAP512
      }
    }
  }
  const __m512 acc[2][5] = {{a0_0, a1_0, a2_0, a3_0, a4_0}, {a0_1, a1_1, a2_1, a3_1, a4_1}};
  for (int i = 0; i < NR; ++i)
    for (int j = 0; j < NS; ++j) _mm512_storeu_ps(out + (i * NS + j) * 16, acc[i][j]);
}

template <int NR>
DLB_AVX512_T void backward_filter_direct_run512(int ns, const Conv2dShape& sh, const float* x, const float* dyt, int c,
                                                int r, int s0, int k0, float* out) {
  switch (ns) {
    case 1: return backward_filter_direct_block512<1, NR>(sh, x, dyt, c, r, s0, k0, out);
    case 2: return backward_filter_direct_block512<2, NR>(sh, x, dyt, c, r, s0, k0, out);
    case 3: return backward_filter_direct_block512<3, NR>(sh, x, dyt, c, r, s0, k0, out);
    case 4: return backward_filter_direct_block512<4, NR>(sh, x, dyt, c, r, s0, k0, out);
    default: return backward_filter_direct_block512<5, NR>(sh, x, dyt, c, r, s0, k0, out);
  }
}

// conv2d_backward_filter_direct_avx2: dw (KCRS) and db over the images of `sh` (overwritten); hands the
// 16-channel blocks to the AVX-512 kernel above when w512 (K % 16 == 0, DLB_CPU_ISA allowing avx512).
// dyt: workspace of n*P*Q*K floats for dy with channels innermost.
DLB_AVX2_FMA void conv2d_backward_filter_direct_avx2(const Conv2dShape& sh, const float* x, const float* dy, float* dw,
                                                     float* db, float* dyt, bool w512) {
  const int K = sh.k, C = sh.c, R = sh.r, S = sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < K; ++k) {
      const float* g = dy + (std::size_t(n) * K + k) * PQ;
      float* t = dyt + std::size_t(n) * PQ * K + k;
      for (std::size_t j = 0; j < PQ; ++j) t[j * K] = g[j];
    }
  if (db) {
    std::fill(db, db + K, 0.f);
    for (int n = 0; n < sh.n; ++n)
      for (int k = 0; k < K; ++k) db[k] += sum(dy + (std::size_t(n) * K + k) * PQ, PQ);
  }
  if (w512) {  // the AVX-512 blocks
    alignas(64) float out512[10 * 16];
    for (int k0 = 0; k0 < K; k0 += 16)
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; r += 2) {
          const int nr = std::min(2, R - r);
          for (int s0 = 0; s0 < S; s0 += 5) {
            const int ns = std::min(5, S - s0);
            if (nr == 2) backward_filter_direct_run512<2>(ns, sh, x, dyt, c, r, s0, k0, out512);
            else backward_filter_direct_run512<1>(ns, sh, x, dyt, c, r, s0, k0, out512);
            for (int k = 0; k < 16; ++k)
              for (int i = 0; i < nr; ++i)
                for (int j = 0; j < ns; ++j)
                  dw[((std::size_t(k0 + k) * C + c) * R + r + i) * S + s0 + j] = out512[(i * ns + j) * 16 + k];
          }
        }
    return;
  }
  alignas(32) float out[5 * 16];
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int nk = std::min(16, K - k0);
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        for (int s0 = 0; s0 < S; s0 += 5) {
          const int ns = std::min(5, S - s0);
          if (nk == 16) backward_filter_direct_run<2>(ns, sh, x, dyt, c, r, s0, k0, out);
          else backward_filter_direct_run<1>(ns, sh, x, dyt, c, r, s0, k0, out);
          for (int k = 0; k < nk; ++k)
            for (int j = 0; j < ns; ++j) dw[((std::size_t(k0 + k) * C + c) * R + r) * S + s0 + j] = out[j * nk + k];
        }
  }
}
}  // namespace detail
#endif

}  // namespace dlb::cpu
