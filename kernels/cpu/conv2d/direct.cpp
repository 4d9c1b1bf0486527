// Direct AVX2 / AVX-512 kernels: forward and backward-filter for few output channels.
#include "kernels/cpu/conv2d/internal.h"
#include "kernels/cpu/simd.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {

// ---------------------------------------------------------------------------------------------
// Fast paths: direct AVX2 kernels for convolutions with few output channels (the lecture's conv2,
// 128 -> 16 channels 5x5). There im2col blows each image up R*S = 25 times (1.3 MB) only for a GEMM
// 16 rows deep, and the copy, not the FMAs, is the cost (docs/notes/2026-11-25-conv-cpu.md). These
// kernels read x in place: 8 or 16 output channels in one or two vector registers, times a run of up
// to 6 output pixels of one row, accumulated over c, r, s.
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

}  // namespace detail
// The forward kernel, once per ISA from one body (direct_forward.inc over simd.h's widths), as the
// sequence kernels are compiled (kernels/cpu/foreach_isa.h; the scalar pass is never called).
#define DLB_ISA_NAMESPACE detail  // inside dlb::cpu here
#define DLB_ISA_INCLUDE "kernels/cpu/conv2d/direct_forward.inc"
#include "kernels/cpu/foreach_isa.h"
namespace detail {

// The forward direct kernel: AVX-512 (K % 16 == 0) or AVX2.
void forward_direct(const Conv2dShape& sh, const float* x, const float* wt, const float* bias, float* y, float* xpad,
                    bool w512) {
  if (w512) return avx512::forward_direct<simd::Avx512>(sh, x, wt, bias, y, xpad);
  avx2::forward_direct<simd::Avx2>(sh, x, wt, bias, y, xpad);
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
