// Pixels-in-lanes GEMMs on one image's im2col matrix (wide K over a shallow C*R*S): forward and
// backward-filter, AVX-512 and AVX2.
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {

// ---- shallow GEMMs on an im2col matrix, pixels in the vector lanes (AVX-512) ----
// For wide K over a shallow C*R*S (the lecture's conv1: K = 128, C*R*S = 75) both the forward and
// the backward-filter are GEMMs over one image's im2col matrix col[T = C*R*S][PQ]:
//   forward          y[k][pix]  = bias[k] + sum_t w[k][t] * col[t][pix]   (outer-product form)
//   backward-filter  dW[k][t]  += sum_pix dy[k][pix] * col[t][pix]         (dot-product form)
// With 16 pixels per zmm, y, dy and col are read and written as they lie (PQ = 784 = 49 x 16 for
// conv1): no scatter of a k-major block into NCHW (the direct kernel stores its 32 x 12 block one
// float at a time, ~20 % of conv1's forward), no unaligned tap offsets, no masked row ends.
// Napkin math, both forms: 4 rows of k x 6 vectors = 24 accumulators; per step 10 loads (4 + 6) for
// 24 FMAs, so the two FMA pipes, not the loads, set the pace. im2col writes 75 x 784 floats
// (235 KB, L2-resident) per image for 15 MFLOP of work.

// One image's im2col for stride 1 and no padding (the shapes the direct kernels take), rows copied
// 16 floats at a time: a row of Q >= 16 ends with a step that overlaps the one before (stores under
// a mask cost more than the few floats written twice); Q < 16 copies under a mask.
DLB_AVX512_T void im2col_s1_avx512(const Conv2dShape& sh, const float* x, float* col) {
  const int P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const std::size_t PQ = std::size_t(P) * Q;
  const __mmask16 part = __mmask16((1u << (Q % 16)) - 1);
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r)
      for (int s = 0; s < sh.s; ++s, col += PQ) {
        const float* src = x + (std::size_t(c) * H + r) * W + s;
        for (int p = 0; p < P; ++p) {
          const float* a = src + std::size_t(p) * W;
          float* d = col + std::size_t(p) * Q;
          if (Q < 16) {
            _mm512_mask_storeu_ps(d, part, _mm512_maskz_loadu_ps(part, a));
            continue;
          }
          int q = 0;
          for (; q + 16 <= Q; q += 16) _mm512_storeu_ps(d + q, _mm512_loadu_ps(a + q));
          if (q < Q) _mm512_storeu_ps(d + Q - 16, _mm512_loadu_ps(a + Q - 16));
        }
      }
}

// NV vectors of pixels (the last one under `last`) x 4 rows of k: y = bias + w[4][T] * col.
template <int NV>
DLB_AVX512_INLINE void forward_col_block512(const float* w, int T, const float* col, std::size_t ldc,
                                            const float* bias, float* y, std::size_t ldy, __mmask16 last) {
  __m512 a0[NV], a1[NV], a2[NV], a3[NV];
  const __m512 z0 = _mm512_set1_ps(bias ? bias[0] : 0.f), z1 = _mm512_set1_ps(bias ? bias[1] : 0.f),
               z2 = _mm512_set1_ps(bias ? bias[2] : 0.f), z3 = _mm512_set1_ps(bias ? bias[3] : 0.f);
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) a0[j] = z0, a1[j] = z1, a2[j] = z2, a3[j] = z3;
  for (int t = 0; t < T; ++t, col += ldc) {
    const __m512 b0 = _mm512_set1_ps(w[t]), b1 = _mm512_set1_ps(w[T + t]), b2 = _mm512_set1_ps(w[2 * T + t]),
                 b3 = _mm512_set1_ps(w[3 * T + t]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const __m512 v = j == NV - 1 ? _mm512_maskz_loadu_ps(last, col + 16 * j) : _mm512_loadu_ps(col + 16 * j);
      a0[j] = _mm512_fmadd_ps(b0, v, a0[j]);
      a1[j] = _mm512_fmadd_ps(b1, v, a1[j]);
      a2[j] = _mm512_fmadd_ps(b2, v, a2[j]);
      a3[j] = _mm512_fmadd_ps(b3, v, a3[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    const __mmask16 m = j == NV - 1 ? last : __mmask16(0xFFFF);
    _mm512_mask_storeu_ps(y + 16 * j, m, a0[j]);
    _mm512_mask_storeu_ps(y + ldy + 16 * j, m, a1[j]);
    _mm512_mask_storeu_ps(y + 2 * ldy + 16 * j, m, a2[j]);
    _mm512_mask_storeu_ps(y + 3 * ldy + 16 * j, m, a3[j]);
  }
}

DLB_AVX512_T void forward_col_run512(int nv, const float* w, int T, const float* col, std::size_t ldc,
                                     const float* bias, float* y, std::size_t ldy, __mmask16 last) {
  switch (nv) {
    case 1: return forward_col_block512<1>(w, T, col, ldc, bias, y, ldy, last);
    case 2: return forward_col_block512<2>(w, T, col, ldc, bias, y, ldy, last);
    case 3: return forward_col_block512<3>(w, T, col, ldc, bias, y, ldy, last);
    case 4: return forward_col_block512<4>(w, T, col, ldc, bias, y, ldy, last);
    case 5: return forward_col_block512<5>(w, T, col, ldc, bias, y, ldy, last);
    default: return forward_col_block512<6>(w, T, col, ldc, bias, y, ldy, last);
  }
}


// Forward of the images of `sh` (w KCRS as given, K a multiple of 4), one image's im2col at a time
// into col (T x PQ floats). The pixel blocks are the outer loop: a block's col panel (T x 96 floats,
// 29 KB for conv1) stays in L1 across the K/4 row blocks.
void conv2d_forward_col_avx512(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                               float* col) {
  const int K = sh.k, T = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q(), xi = std::size_t(sh.c) * sh.h * sh.w;
  const bool s1 = sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0;
  for (int n = 0; n < sh.n; ++n) {
    if (s1) im2col_s1_avx512(sh, x + n * xi, col);
    else im2col(sh, x + n * xi, 1, col);
    float* yn = y + std::size_t(n) * K * PQ;
    for_pixel_blocks(PQ, [&](std::size_t p0, int nv, __mmask16 last) {
      for (int k0 = 0; k0 < K; k0 += 4)
        forward_col_run512(nv, w + std::size_t(k0) * T, T, col + p0, PQ, bias ? bias + k0 : nullptr,
                           yn + std::size_t(k0) * PQ + p0, PQ, last);
    });
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's unpack intrinsics (an undefined vector inside)
#endif
// The lane sums of a, b, c and d as one __m128 {sum a, sum b, sum c, sum d}: 13 instructions
// against 4 x 8 for four horizontal reductions (a 75 x 128 dW is 9600 of them per image).
DLB_AVX512_INLINE __m128 hsum4x512(__m512 a, __m512 b, __m512 c, __m512 d) {
  // per 128-bit lane: {a0+a2, b0+b2, a1+a3, b1+b3} and the same for c, d
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  // per 128-bit lane: {a, b, c, d} partial sums
  const __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// dWt[t0 .. t0+NT-1][k0 .. k0+3] (dW in TK order, rows of ldt floats) += sum over one image's PQ
// pixels of dy[k][pix] * col[t][pix] (dy rows PQ floats apart, col rows ldc apart). The ragged last
// vector loads under `last` (zeros beyond it, in both operands: what lies there may be anything,
// even inf). The lane sums are reduced once, four channels at a time.
template <int NT>
DLB_AVX512_INLINE void backward_filter_col_block512(const float* dy, const float* col, std::size_t ldc,
                                                    std::size_t PQ, __mmask16 last, float* dwt, int ldt) {
  __m512 a0[NT], a1[NT], a2[NT], a3[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) a0[t] = a1[t] = a2[t] = a3[t] = _mm512_setzero_ps();
#define DLB_COL_STEP(LOAD)                                                                                 \
  {                                                                                                       \
    const __m512 g0 = LOAD(dy + p), g1 = LOAD(dy + PQ + p), g2 = LOAD(dy + 2 * PQ + p), g3 = LOAD(dy + 3 * PQ + p); \
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t) {                                                \
      const __m512 v = LOAD(col + t * ldc + p);                                                           \
      a0[t] = _mm512_fmadd_ps(g0, v, a0[t]);                                                              \
      a1[t] = _mm512_fmadd_ps(g1, v, a1[t]);                                                              \
      a2[t] = _mm512_fmadd_ps(g2, v, a2[t]);                                                              \
      a3[t] = _mm512_fmadd_ps(g3, v, a3[t]);                                                              \
    }                                                                                                     \
  }
  const std::size_t full = PQ / 16 * 16;
  std::size_t p = 0;
  for (; p < full; p += 16) DLB_COL_STEP(_mm512_loadu_ps)
  if (p < PQ) {
#define DLB_MASKED_LOAD(ptr) _mm512_maskz_loadu_ps(last, ptr)
    DLB_COL_STEP(DLB_MASKED_LOAD)
#undef DLB_MASKED_LOAD
  }
#undef DLB_COL_STEP
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
    _mm_storeu_ps(dwt + t * ldt, _mm_add_ps(_mm_loadu_ps(dwt + t * ldt), hsum4x512(a0[t], a1[t], a2[t], a3[t])));
}

DLB_AVX512_T void backward_filter_col_run512(int nt, const float* dy, const float* col, std::size_t ldc,
                                             std::size_t PQ, __mmask16 last, float* dwt, int ldt) {
  switch (nt) {
    case 1: return backward_filter_col_block512<1>(dy, col, ldc, PQ, last, dwt, ldt);
    case 2: return backward_filter_col_block512<2>(dy, col, ldc, PQ, last, dwt, ldt);
    case 3: return backward_filter_col_block512<3>(dy, col, ldc, PQ, last, dwt, ldt);
    case 4: return backward_filter_col_block512<4>(dy, col, ldc, PQ, last, dwt, ldt);
    case 5: return backward_filter_col_block512<5>(dy, col, ldc, PQ, last, dwt, ldt);
    default: return backward_filter_col_block512<6>(dy, col, ldc, PQ, last, dwt, ldt);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Backward-filter of the images of `sh` (dw KCRS and db overwritten; K a multiple of 4; stride 1,
// no padding), one image at a time: its im2col into col, then blocks of 4 channels x 6 taps. db
// rides along as one more row of col, all ones: dW's extra tap. The tap blocks are the outer loop:
// a block's col rows (6 x PQ floats, 19 KB for conv1) stay in L1 while the K/4 channel blocks stream
// the image's dy (400 KB for conv1: L2) past them. One image per im2col: two would halve the lane
// reductions, but 1.25 MB of col and dy no longer fit L2 (see docs/notes/2026-11-25-conv-cpu.md).
void conv2d_backward_filter_col_avx512(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw,
                                       float* db, std::vector<float>& ws) {
  const int K = sh.k, T = sh.c * sh.r * sh.s, T1 = T + (db ? 1 : 0);
  const std::size_t PQ = std::size_t(sh.p()) * sh.q(), xi = std::size_t(sh.c) * sh.h * sh.w;
  const __mmask16 last = PQ % 16 ? __mmask16((1u << (PQ % 16)) - 1) : __mmask16(0xFFFF);
  float* col = ensure_aligned(ws, std::size_t(T1) * PQ + std::size_t(T1) * K);
  float* dwt = col + std::size_t(T1) * PQ;  // dW (and db) in TK order: a block's 4 channel sums of a tap are contiguous
  std::fill(dwt, dwt + std::size_t(T1) * K, 0.f);
  if (db) std::fill(col + std::size_t(T) * PQ, col + std::size_t(T1) * PQ, 1.f);
  for (int n = 0; n < sh.n; ++n) {
    im2col_s1_avx512(sh, x + n * xi, col);
    const float* dn = dy_of(n);
    for (int t0 = 0; t0 < T1; t0 += 6)
      for (int k0 = 0; k0 < K; k0 += 4)
        backward_filter_col_run512(std::min(6, T1 - t0), dn + std::size_t(k0) * PQ, col + t0 * PQ, PQ, PQ, last,
                                   dwt + std::size_t(t0) * K + k0, K);
  }
  for (int k = 0; k < K; ++k)
    for (int t = 0; t < T; ++t) dw[std::size_t(k) * T + t] = dwt[std::size_t(t) * K + k];
  if (db) std::copy(dwt + std::size_t(T) * K, dwt + std::size_t(T1) * K, db);
}
// ---- backward-filter for wide K over a shallow C*R*S in AVX2: the GEMM of
// conv2d_backward_filter_col_avx512 with 8 pixels a vector, blocks of 2 channels x 6 taps (12
// accumulators, 2 dy vectors and the col vector: 15 of 16 registers; 8 loads per 12 FMAs), the
// pixel lanes summed once per block and image. The col vector is held in a register by force: GCC
// otherwise folds its load into both FMAs (14 loads per 12 FMAs). (Measurements: docs/notes/2026-11-25-conv-cpu.md.)

// The lanes of the last 8-float vector of a row of n floats that lie in the row (all 8 when n % 8 == 0).
DLB_AVX2_FMA_INLINE __m256i last_lanes_avx2(std::size_t n) {
  const int tail = int(n % 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(tail == 0 ? 8 : tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// {sum a, sum b, sum c, sum d}
DLB_AVX2_FMA_INLINE __m128 hsum4x256(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// dWt[t0 .. t0+NT-1][k0, k0+1] (TK order, rows of ldt floats) += sum over len pixels of
// dy[k][pix] * col[t][pix] (dy rows PQ floats apart, col rows ldc); a last vector's lanes under `last`.
template <int NT>
DLB_AVX2_FMA_INLINE void backward_filter_col_block_avx2(const float* dy, const float* col, std::size_t ldc,
                                                        std::size_t len, std::size_t PQ, __m256i last, float* dwt,
                                                        int ldt) {
  __m256 a0[NT], a1[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) a0[t] = a1[t] = _mm256_setzero_ps();
#define DLB_COL_STEP(LOAD)                                          \
  {                                                                \
    const __m256 g0 = LOAD(dy + p), g1 = LOAD(dy + PQ + p);         \
    _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t) {         \
      __m256 v = LOAD(col + t * ldc + p);                          \
      asm("" : "+x"(v)); /* one load, not one per FMA */           \
      a0[t] = _mm256_fmadd_ps(g0, v, a0[t]);                       \
      a1[t] = _mm256_fmadd_ps(g1, v, a1[t]);                       \
    }                                                              \
  }
  const std::size_t full = len / 8 * 8;
  std::size_t p = 0;
  for (; p < full; p += 8) DLB_COL_STEP(_mm256_loadu_ps)
  if (p < len) {
#define DLB_MASKED_LOAD(ptr) _mm256_maskload_ps(ptr, last)
    DLB_COL_STEP(DLB_MASKED_LOAD)
#undef DLB_MASKED_LOAD
  }
#undef DLB_COL_STEP
#pragma GCC unroll 8
  for (int t = 0; t < NT; t += 2) {
    const __m256 z = _mm256_setzero_ps();
    const __m128 s = hsum4x256(a0[t], a1[t], t + 1 < NT ? a0[t + 1] : z, t + 1 < NT ? a1[t + 1] : z);
    float* d0 = dwt + t * ldt;
    d0[0] += _mm_cvtss_f32(s), d0[1] += _mm_cvtss_f32(_mm_shuffle_ps(s, s, 1));
    if (t + 1 < NT) {
      float* d1 = d0 + ldt;
      d1[0] += _mm_cvtss_f32(_mm_shuffle_ps(s, s, 2)), d1[1] += _mm_cvtss_f32(_mm_shuffle_ps(s, s, 3));
    }
  }
}

DLB_AVX2_FMA void backward_filter_col_run_avx2(int nt, const float* dy, const float* col, std::size_t ldc,
                                               std::size_t len, std::size_t PQ, __m256i last, float* dwt, int ldt) {
  switch (nt) {
    case 1: return backward_filter_col_block_avx2<1>(dy, col, ldc, len, PQ, last, dwt, ldt);
    case 2: return backward_filter_col_block_avx2<2>(dy, col, ldc, len, PQ, last, dwt, ldt);
    case 3: return backward_filter_col_block_avx2<3>(dy, col, ldc, len, PQ, last, dwt, ldt);
    case 4: return backward_filter_col_block_avx2<4>(dy, col, ldc, len, PQ, last, dwt, ldt);
    case 5: return backward_filter_col_block_avx2<5>(dy, col, ldc, len, PQ, last, dwt, ldt);
    default: return backward_filter_col_block_avx2<6>(dy, col, ldc, len, PQ, last, dwt, ldt);
  }
}

// As conv2d_backward_filter_col_avx512 (K a multiple of 2): per image its im2col, then the tap
// blocks (6 col rows: 19 KB for conv1, in L1) x the channel pairs streaming dy; db as a row of ones.
DLB_AVX2_FMA void conv2d_backward_filter_col_avx2(const Conv2dShape& sh, const float* x, const DyImage& dy_of,
                                                  float* dw, float* db, std::vector<float>& ws) {
  const int K = sh.k, T = sh.c * sh.r * sh.s, T1 = T + (db ? 1 : 0);
  const std::size_t PQ = std::size_t(sh.p()) * sh.q(), xi = std::size_t(sh.c) * sh.h * sh.w;
  const __m256i last = last_lanes_avx2(PQ);
  float* col = ensure_aligned(ws, std::size_t(T1) * PQ + std::size_t(T1) * K);
  float* dwt = col + std::size_t(T1) * PQ;
  std::fill(dwt, dwt + std::size_t(T1) * K, 0.f);
  if (db) std::fill(col + std::size_t(T) * PQ, col + std::size_t(T1) * PQ, 1.f);
  for (int n = 0; n < sh.n; ++n) {
    im2col(sh, x + n * xi, 1, col);
    const float* dn = dy_of(n);
    for (int t0 = 0; t0 < T1; t0 += 6)
      for (int k0 = 0; k0 < K; k0 += 2)
        backward_filter_col_run_avx2(std::min(6, T1 - t0), dn + std::size_t(k0) * PQ, col + t0 * PQ, PQ, PQ, PQ, last,
                                     dwt + std::size_t(t0) * K + k0, K);
  }
  for (int k = 0; k < K; ++k)
    for (int t = 0; t < T; ++t) dw[std::size_t(k) * T + t] = dwt[std::size_t(t) * K + k];
  if (db) std::copy(dwt + std::size_t(T) * K, dwt + std::size_t(T1) * K, db);
}

// ---- forward for wide K over a shallow C*R*S in AVX2: the GEMM of conv2d_forward_col_avx512 with
// 8 pixels a vector, blocks of 4 channels x 3 vectors (12 accumulators, 3 col vectors and one
// broadcast: all 16 registers; 7 loads per 12 FMAs), over panels of 12 vectors (96 pixels: T x 96
// floats, 29 KB for conv1, in L1 across the K/4 channel blocks). No masked stores (vmaskmov is slow
// on AMD). (Measurements: docs/notes/2026-11-25-conv-cpu.md.)
template <int NV, bool RAGGED>
DLB_AVX2_FMA_INLINE void forward_col_block_avx2(const float* w, int T, const float* col, std::size_t ldc,
                                                const float* bias, float* y, std::size_t ldy, __m256i last) {
  __m256 a0[NV], a1[NV], a2[NV], a3[NV];
  const __m256 z0 = _mm256_set1_ps(bias ? bias[0] : 0.f), z1 = _mm256_set1_ps(bias ? bias[1] : 0.f),
               z2 = _mm256_set1_ps(bias ? bias[2] : 0.f), z3 = _mm256_set1_ps(bias ? bias[3] : 0.f);
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) a0[j] = z0, a1[j] = z1, a2[j] = z2, a3[j] = z3;
  for (int t = 0; t < T; ++t, col += ldc) {
    // Three named registers, not an array: an array behind the asm below lives on the stack. The
    // asm holds each col vector in a register (one load per vector, not one per FMA).
    __m256 u0, u1 = _mm256_setzero_ps(), u2 = _mm256_setzero_ps();
#define DLB_FWD_COL_LOAD(u, j)                                                                              \
  do {                                                                                                    \
    u = RAGGED && j == NV - 1 ? _mm256_maskload_ps(col + 8 * j, last) : _mm256_loadu_ps(col + 8 * j); \
    asm("" : "+x"(u));                                                                                    \
  } while (0)
    DLB_FWD_COL_LOAD(u0, 0);
    if (NV > 1) DLB_FWD_COL_LOAD(u1, 1);
    if (NV > 2) DLB_FWD_COL_LOAD(u2, 2);
#undef DLB_FWD_COL_LOAD
    const __m256 v[3] = {u0, u1, u2};
    __m256 b = _mm256_broadcast_ss(w + t);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) a0[j] = _mm256_fmadd_ps(b, v[j], a0[j]);
    b = _mm256_broadcast_ss(w + T + t);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) a1[j] = _mm256_fmadd_ps(b, v[j], a1[j]);
    b = _mm256_broadcast_ss(w + 2 * T + t);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) a2[j] = _mm256_fmadd_ps(b, v[j], a2[j]);
    b = _mm256_broadcast_ss(w + 3 * T + t);
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) a3[j] = _mm256_fmadd_ps(b, v[j], a3[j]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    if (RAGGED && j == NV - 1) {  // (a masked store is slow on AMD: only the ragged vector takes one)
      _mm256_maskstore_ps(y + 8 * j, last, a0[j]);
      _mm256_maskstore_ps(y + ldy + 8 * j, last, a1[j]);
      _mm256_maskstore_ps(y + 2 * ldy + 8 * j, last, a2[j]);
      _mm256_maskstore_ps(y + 3 * ldy + 8 * j, last, a3[j]);
    } else {
      _mm256_storeu_ps(y + 8 * j, a0[j]);
      _mm256_storeu_ps(y + ldy + 8 * j, a1[j]);
      _mm256_storeu_ps(y + 2 * ldy + 8 * j, a2[j]);
      _mm256_storeu_ps(y + 3 * ldy + 8 * j, a3[j]);
    }
  }
}

// Forward of the images of `sh` (w KCRS as given, K a multiple of 4), one image's im2col at a time
// into col (T x PQ floats), as conv2d_forward_col_avx512.
DLB_AVX2_FMA void conv2d_forward_col_avx2(const Conv2dShape& sh, const float* x, const float* w, const float* bias,
                                          float* y, float* col) {
  const int K = sh.k, T = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q(), xi = std::size_t(sh.c) * sh.h * sh.w;
  const int nvec = int((PQ + 7) / 8), tail = int(PQ % 8);
  const __m256i last = last_lanes_avx2(PQ);
  constexpr int kPanel = 12;
  for (int n = 0; n < sh.n; ++n) {
    im2col(sh, x + n * xi, 1, col);
    float* yn = y + std::size_t(n) * K * PQ;
    for (int v0 = 0; v0 < nvec; v0 += kPanel) {
      const int v1 = std::min(nvec, v0 + kPanel);
      for (int k0 = 0; k0 < K; k0 += 4) {
        const float* wk = w + std::size_t(k0) * T;
        const float* bk = bias ? bias + k0 : nullptr;
        float* yk = yn + std::size_t(k0) * PQ;
        for (int v = v0; v < v1; v += 3) {
          const int nv = std::min(3, v1 - v);
          const std::size_t p0 = std::size_t(v) * 8;
          const float* c = col + p0;
          float* o = yk + p0;
          if (tail != 0 && v + nv == nvec) {
            if (nv == 3) forward_col_block_avx2<3, true>(wk, T, c, PQ, bk, o, PQ, last);
            else if (nv == 2) forward_col_block_avx2<2, true>(wk, T, c, PQ, bk, o, PQ, last);
            else forward_col_block_avx2<1, true>(wk, T, c, PQ, bk, o, PQ, last);
          } else if (nv == 3) {
            forward_col_block_avx2<3, false>(wk, T, c, PQ, bk, o, PQ, last);
          } else if (nv == 2) {
            forward_col_block_avx2<2, false>(wk, T, c, PQ, bk, o, PQ, last);
          } else {
            forward_col_block_avx2<1, false>(wk, T, c, PQ, bk, o, PQ, last);
          }
        }
      }
    }
  }
}

// The own-GEMM forward and backward-filter, in AVX-512 (w512) or AVX2.
void forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y, float* col,
                 bool w512) {
  if (w512) return conv2d_forward_col_avx512(sh, x, w, bias, y, col);
  conv2d_forward_col_avx2(sh, x, w, bias, y, col);
}
void backward_filter_col(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw, float* db,
                         std::vector<float>& ws, bool w512) {
  if (w512) return conv2d_backward_filter_col_avx512(sh, x, dy_of, dw, db, ws);
  conv2d_backward_filter_col_avx2(sh, x, dy_of, dw, db, ws);
}
}  // namespace detail
#endif

}  // namespace dlb::cpu
