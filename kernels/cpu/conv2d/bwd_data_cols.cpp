// Backward-data as a forward conv over rotated filters, and the "cols" kernels that run it over dy's
// columns without the zero border (AVX-512, AVX2).
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>
#include <cstring>

namespace dlb::cpu {
using namespace detail;

namespace detail {
// The convolution that backward_data_as_forward runs instead: input dy, output dx.
Conv2dShape rotated_shape(const Conv2dShape& sh) {
  Conv2dShape t;
  t.n = sh.n, t.c = sh.k, t.h = sh.p(), t.w = sh.q(), t.k = sh.c, t.r = sh.r, t.s = sh.s;
  t.pad_h = sh.r - 1 - sh.pad_h, t.pad_w = sh.s - 1 - sh.pad_w;
  return t;
}

// Its filters: W'[c][k][R-1-r][S-1-s] = W[k][c][r][s] (wt holds w_size() floats).
void rotate_filters(const Conv2dShape& sh, const float* w, float* wt) {
  const int RS = sh.r * sh.s;
  for (int k = 0; k < sh.k; ++k)
    for (int c = 0; c < sh.c; ++c) {
      const float* src = w + (std::size_t(k) * sh.c + c) * RS;
      float* dst = wt + (std::size_t(c) * sh.k + k) * RS;
      for (int i = 0; i < RS; ++i) dst[RS - 1 - i] = src[i];
    }
}

// The rotated filters in the CRSK order of the direct kernel: wt[((k*R + r)*S + s)*C + c] =
// W[k][c][R-1-r][S-1-s] (the rotated conv's input channels are our k, its outputs our c).
void rotate_filters_crsk(const Conv2dShape& sh, const float* w, float* wt) {
  const int R = sh.r, S = sh.s, C = sh.c, RS = R * S;
  for (int k = 0; k < sh.k; ++k)
    for (int t = 0; t < RS; ++t) {  // written in order; tap t reads tap RS-1-t of every channel
      const float* src = w + std::size_t(k) * C * RS + (RS - 1 - t);
      float* dst = wt + (std::size_t(k) * RS + t) * C;
      for (int c = 0; c < C; ++c) dst[c] = src[std::size_t(c) * RS];
    }
}

#ifdef DLB_DIRECT_KERNELS
// ---- backward-data by dy columns (AVX-512): the rotated forward conv without the zero border.
// Run as a forward conv over dy padded by S-1-pad ("full" padding), a tap s of output column w
// reads the border unless 0 <= w - s + pad < Q: for conv2 (dy 16x10x10 -> dx 128x14x14, 5x5) 29% of
// the taps the row skip leaves multiply zeros. Here a block (a run of NP dx pixels of one row x 16*NV
// channels c) loops over dy's columns u instead of the taps: one broadcast of dy[u] feeds the taps s
// whose pixel j = u - s lies in the run, with the row's S filter vectors held in registers, and
// only the columns inside dy are visited, so no FMA multiplies the border and dy is read unpadded.
// Napkin math (conv2, NP = 7, NV = 2, per dy channel and filter row): 10 filter loads + 7
// broadcasts for 50 FMAs, all of them useful, against the padded kernel's 70 FMAs (35 broadcasts).
// Registers: 2*NP accumulators + 2*S filters + 1 (27 of 32 for NP = 8, S = 5).
// The blocks of a dx row write a [W][32] row buffer (a vector store per pixel), moved to NCHW dx in
// 16 x 16 register transposes; the filters are rotated into a blocked layout (rotate_filters_cols16)
// so that a block's S*NV filter vectors lie together.
constexpr int kColsMaxRun = 8;


// out[NP][16*NV] (pixel-major, overwritten): the block's sums. dy at (channel 0, first row taken,
// column of u = 0), rows of `ld` floats, channels `plane` apart; nr rows; wt: the blocked filters
// (rotate_filters_cols16) at (channel 0, first row taken, c0), `wk` floats per dy channel and `wr`
// per filter row; [lo, hi): the columns u read (inside dy). K dy channels.
template <int NP, int S, int NV>
DLB_AVX512_INLINE void backward_data_cols_block512(const float* dy, std::size_t plane, int ld, int nr, int lo, int hi,
                                                   const float* wt, std::size_t wk, std::size_t wr, int K, float* out) {
  static_assert(NP >= 1 && NP <= kColsMaxRun && (S == 3 || S == 5) && (NV == 1 || NV == 2), "block shape");
  constexpr int NC = 16 * NV;  // filter floats per tap in the blocked layout
  // Named registers (see forward_direct_block): accumulators a<pixel>_<vector>, filters f<tap>_<vector>.
  __m512 a0_0 = _mm512_setzero_ps(), a0_1 = a0_0, a1_0 = a0_0, a1_1 = a0_0, a2_0 = a0_0, a2_1 = a0_0;
  __m512 a3_0 = a0_0, a3_1 = a0_0, a4_0 = a0_0, a4_1 = a0_0, a5_0 = a0_0, a5_1 = a0_0;
  __m512 a6_0 = a0_0, a6_1 = a0_0, a7_0 = a0_0, a7_1 = a0_0;
  for (int k = 0; k < K; ++k, dy += plane, wt += wk) {
    const float* xr = dy;
    const float* w = wt;
    for (int r = 0; r < nr; ++r, xr += ld, w += wr) {
      __m512 f0_0 = _mm512_loadu_ps(w), f1_0 = _mm512_loadu_ps(w + NC), f2_0 = _mm512_loadu_ps(w + 2 * NC);
      __m512 f3_0 = f0_0, f4_0 = f0_0;
      if constexpr (S > 3) f3_0 = _mm512_loadu_ps(w + 3 * NC), f4_0 = _mm512_loadu_ps(w + 4 * NC);
      __m512 f0_1 = f0_0, f1_1 = f0_0, f2_1 = f0_0, f3_1 = f0_0, f4_1 = f0_0;
      if constexpr (NV > 1) {
        f0_1 = _mm512_loadu_ps(w + 16), f1_1 = _mm512_loadu_ps(w + NC + 16), f2_1 = _mm512_loadu_ps(w + 2 * NC + 16);
        if constexpr (S > 3) f3_1 = _mm512_loadu_ps(w + 3 * NC + 16), f4_1 = _mm512_loadu_ps(w + 4 * NC + 16);
      }
      // Tap s of pixel j (j + s = u) and the column u: taps only where the pixel is in the run,
      // columns (a branch that goes the same way for the whole block) only inside dy.
#define DLB_TAP(j, s)                                                   \
  if constexpr (j < NP && s < S) {                                      \
    a##j##_0 = _mm512_fmadd_ps(f##s##_0, xb, a##j##_0);                 \
    if constexpr (NV > 1) a##j##_1 = _mm512_fmadd_ps(f##s##_1, xb, a##j##_1); \
  }
#define DLB_COL(u, TAPS)                         \
  if constexpr (u < NP + S - 1)                  \
    if (u >= lo && u < hi) {                     \
      const __m512 xb = _mm512_set1_ps(xr[u]);   \
      TAPS                                       \
    }
      DLB_COL(0, DLB_TAP(0, 0))
      DLB_COL(1, DLB_TAP(1, 0) DLB_TAP(0, 1))
      DLB_COL(2, DLB_TAP(2, 0) DLB_TAP(1, 1) DLB_TAP(0, 2))
      DLB_COL(3, DLB_TAP(3, 0) DLB_TAP(2, 1) DLB_TAP(1, 2) DLB_TAP(0, 3))
      DLB_COL(4, DLB_TAP(4, 0) DLB_TAP(3, 1) DLB_TAP(2, 2) DLB_TAP(1, 3) DLB_TAP(0, 4))
      DLB_COL(5, DLB_TAP(5, 0) DLB_TAP(4, 1) DLB_TAP(3, 2) DLB_TAP(2, 3) DLB_TAP(1, 4))
      DLB_COL(6, DLB_TAP(6, 0) DLB_TAP(5, 1) DLB_TAP(4, 2) DLB_TAP(3, 3) DLB_TAP(2, 4))
      DLB_COL(7, DLB_TAP(7, 0) DLB_TAP(6, 1) DLB_TAP(5, 2) DLB_TAP(4, 3) DLB_TAP(3, 4))
      DLB_COL(8, DLB_TAP(7, 1) DLB_TAP(6, 2) DLB_TAP(5, 3) DLB_TAP(4, 4))
      DLB_COL(9, DLB_TAP(7, 2) DLB_TAP(6, 3) DLB_TAP(5, 4))
      DLB_COL(10, DLB_TAP(7, 3) DLB_TAP(6, 4))
      DLB_COL(11, DLB_TAP(7, 4))
#undef DLB_COL
#undef DLB_TAP
    }
  }
  const __m512 acc[8][2] = {{a0_0, a0_1}, {a1_0, a1_1}, {a2_0, a2_1}, {a3_0, a3_1},
                            {a4_0, a4_1}, {a5_0, a5_1}, {a6_0, a6_1}, {a7_0, a7_1}};
  for (int i = 0; i < NP; ++i)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + i * NC + 16 * v, acc[i][v]);
}

template <int S, int NV>
DLB_AVX512_INLINE void backward_data_cols_run512(int np, const float* dy, std::size_t plane, int ld, int nr, int lo,
                                                 int hi, const float* wt, std::size_t wk, std::size_t wr, int K,
                                                 float* out) {
  switch (np) {
#define DLB_CASE(n) \
  case n: return backward_data_cols_block512<n, S, NV>(dy, plane, ld, nr, lo, hi, wt, wk, wr, K, out);
    DLB_CASE(1) DLB_CASE(2) DLB_CASE(3) DLB_CASE(4) DLB_CASE(5) DLB_CASE(6) DLB_CASE(7)
#undef DLB_CASE
    default: return backward_data_cols_block512<8, S, NV>(dy, plane, ld, nr, lo, hi, wt, wk, wr, K, out);
  }
}

// (Where these run: algos.cpp, cols_fits.)

// The rotated filters for conv2d_backward_data_cols_avx512 (rotate_filters_cols16), blocked: for each dy channel k and
// rotated row r, the channels c in blocks of 32 (the last may be 16), in a block the S taps, in a
// tap the block's channels: wt[(k*R + r)*S*C + c0*S + s*nc + c - c0] = W[k][c][R-1-r][S-1-s].
// Per k, W[k] ([C][R*S]) is transposed in 16 x 16 tiles into tmp ([R*S][C]), then its rows are
// copied to their blocks in reversed tap order.
DLB_AVX512_T void rotate_filters_cols16(const Conv2dShape& sh, const float* w, float* wt) {
  const int C = sh.c, R = sh.r, S = sh.s, RS = R * S;
  std::vector<float> tmp(std::size_t(RS) * C);
  for (int k = 0; k < sh.k; ++k) {
    const float* wk = w + std::size_t(k) * C * RS;
    for (int c0 = 0; c0 < C; c0 += 16)
      for (int t0 = 0; t0 < RS; t0 += 16)
        transpose16(wk + std::size_t(c0) * RS + t0, RS, 16, std::min(16, RS - t0), tmp.data() + std::size_t(t0) * C + c0,
                    C);
    float* dk = wt + std::size_t(k) * RS * C;
    for (int t = 0; t < RS; ++t) {
      const int rt = RS - 1 - t, r = rt / S, s = rt % S;  // tap t of W is tap (r, s) of the rotated filter
      const float* src = tmp.data() + std::size_t(t) * C;
      for (int c0 = 0; c0 < C;) {
        const int nc = C - c0 >= 32 ? 32 : 16;
        std::memcpy(dk + std::size_t(r) * S * C + std::size_t(c0) * S + s * nc, src + c0, sizeof(float) * nc);
        c0 += nc;
      }
    }
  }
}

// conv2d_backward_data_cols_avx512: dx (NCHW, overwritten) of `sh` from dy; wt: rotate_filters_cols16.
// Each dx row is cut into near-equal runs of <= kColsMaxRun; rowbuf: W*32 floats.
template <int S>
DLB_AVX512_T void conv2d_backward_data_cols_avx512(const Conv2dShape& sh, const float* dy, const float* wt, float* dx,
                                                   float* rowbuf) {
  const int K = sh.k, C = sh.c, R = sh.r, P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const int ph = R - 1 - sh.pad_h, pw = S - 1 - sh.pad_w;  // the rotated conv's "full" padding
  const std::size_t PQ = std::size_t(P) * Q, HW = std::size_t(H) * W, wk = std::size_t(R) * S * C, wr = std::size_t(S) * C;
  const int runs = (W + kColsMaxRun - 1) / kColsMaxRun, run = (W + runs - 1) / runs;
  for (int n = 0; n < sh.n; ++n) {
    const float* dyn = dy + std::size_t(n) * K * PQ;
    float* dxn = dx + std::size_t(n) * C * HW;
    for (int c0 = 0; c0 < C;) {
      const int nc = C - c0 >= 32 ? 32 : 16;
      for (int h = 0; h < H; ++h) {
        const int r0 = std::max(0, ph - h), r1 = std::min(R, ph + P - h);  // filter rows inside dy
        // dy row of filter row r0 (no row inside dy: nothing is read, the row is zeros)
        const float* d = r1 > r0 ? dyn + std::size_t(h + r0 - ph) * Q : dyn;
        const float* f = wt + std::size_t(r0) * wr + std::size_t(c0) * S;
        for (int w0 = 0; w0 < W; w0 += run) {
          const int np = std::min(run, W - w0);
          // dy column of u = 0 is w0 - pw; the columns inside dy: u in [lo, hi). The pointer may
          // point before the row; only columns inside it are read.
          const int off = w0 - pw, lo = std::max(0, -off), hi = std::min(np + S - 1, Q - off);
          float* out = rowbuf + std::size_t(w0) * nc;
          if (nc == 32) backward_data_cols_run512<S, 2>(np, d + off, PQ, Q, r1 - r0, lo, hi, f, wk, wr, K, out);
          else backward_data_cols_run512<S, 1>(np, d + off, PQ, Q, r1 - r0, lo, hi, f, wk, wr, K, out);
        }
        for (int v = 0; v < nc; v += 16)
          for (int w0 = 0; w0 < W; w0 += 16)
            transpose16(rowbuf + std::size_t(w0) * nc + v, nc, std::min(16, W - w0), 16,
                        dxn + (c0 + v) * HW + std::size_t(h) * W + w0, HW);
      }
      c0 += nc;
    }
  }
}

// ---- the same in AVX2: blocks of 8*NV channels c (NV = 2: two ymm; a last block of 8: one) x a
// run of up to 7 dx pixels. AVX2 has 16 registers: the 2*NP accumulators and a broadcast take 15,
// so the filters are not held in registers but read by each FMA from L1 (its memory operand), and
// the columns inside dy are the bits of one register, tested by an immediate per column.
// Napkin math (conv2, NP = 7, NV = 2, per dy channel and filter row, interior block): 7 broadcasts
// + 50 filter loads for 50 FMAs, all useful; Zen 3 loads two ymm a cycle, so about 88% of its FMA
// rate. (Measurements and the variants tried: docs/notes/2026-11-25-conv-cpu.md.)
constexpr int kColsMaxRunAvx2 = 7;

// dst[j*ldd + i] = src[i*lds + j] for rows i < nr and columns j < nc: an 8 x 8 register transpose
// (src rows beyond nr are not read, nor columns beyond nc; dst gets nr floats a row).
DLB_AVX2_FMA_INLINE void transpose8(const float* src, std::size_t lds, int nr, int nc, float* dst, std::size_t ldd) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mc = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc), lane), mr = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i)
    r[i] = i >= nr ? _mm256_setzero_ps() : nc == 8 ? _mm256_loadu_ps(src + i * lds) : _mm256_maskload_ps(src + i * lds, mc);
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
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

// The rotated filters in blocks of 16 channels (the last may be 8): wt[(k*R + r)*S*C + c0*S +
// s*nc + c - c0] = W[k][c][R-1-r][S-1-s]. As rotate_filters_cols16: per k, W[k] ([C][R*S]) is
// transposed in 8 x 8 tiles into tmp ([R*S][C]), whose rows go to their blocks in reversed tap
// order. (Element by element, this took about 10% of the conv's time at batch 2.)
DLB_AVX2_FMA void rotate_filters_cols_avx2(const Conv2dShape& sh, const float* w, float* wt) {
  const int C = sh.c, R = sh.r, S = sh.s, RS = R * S;
  thread_local std::vector<float> tmp;
  tmp.resize(std::size_t(RS) * C);
  for (int k = 0; k < sh.k; ++k) {
    const float* wk = w + std::size_t(k) * C * RS;
    for (int c0 = 0; c0 < C; c0 += 8)
      for (int t0 = 0; t0 < RS; t0 += 8)
        transpose8(wk + std::size_t(c0) * RS + t0, RS, 8, std::min(8, RS - t0), tmp.data() + std::size_t(t0) * C + c0, C);
    float* dk = wt + std::size_t(k) * RS * C;
    for (int t = 0; t < RS; ++t) {
      const int rt = RS - 1 - t, r = rt / S, s = rt % S;  // tap t of W is tap (r, s) of the rotated filter
      const float* src = tmp.data() + std::size_t(t) * C;
      for (int c0 = 0; c0 < C;) {
        const int nc = C - c0 >= 16 ? 16 : 8;
        float* d = dk + std::size_t(r) * S * C + std::size_t(c0) * S + s * nc;
        for (int v = 0; v < nc; v += 8) _mm256_storeu_ps(d + v, _mm256_loadu_ps(src + c0 + v));  // (memcpy: rep movsq)
        c0 += nc;
      }
    }
  }
}

// out[NP][8*NV] (overwritten): as backward_data_cols_block512 with 8*NV channels; wt:
// rotate_filters_cols_avx2 at (channel 0, first row taken, c0).
template <int NP, int S, int NV>
DLB_AVX2_FMA_INLINE void backward_data_cols_block_avx2(const float* dy, std::size_t plane, int ld, int nr, int lo,
                                                       int hi, const float* wt, std::size_t wk, std::size_t wr, int K,
                                                       float* out) {
  static_assert(NP >= 1 && NP <= kColsMaxRunAvx2 && (S == 3 || S == 5) && (NV == 1 || NV == 2), "block shape");
  constexpr int NC = 8 * NV;
  unsigned cols = ((1u << hi) - 1) & ~((1u << lo) - 1);  // bit u: column u is inside dy
  __m256 a0_0 = _mm256_setzero_ps(), a0_1 = a0_0, a1_0 = a0_0, a1_1 = a0_0, a2_0 = a0_0, a2_1 = a0_0;
  __m256 a3_0 = a0_0, a3_1 = a0_0, a4_0 = a0_0, a4_1 = a0_0, a5_0 = a0_0, a5_1 = a0_0, a6_0 = a0_0, a6_1 = a0_0;
  for (int k = 0; k < K; ++k, dy += plane, wt += wk) {
    const float* xr = dy;
    const float* w = wt;
    for (int r = 0; r < nr; ++r, xr += ld, w += wr) {
      asm("" : "+r"(cols));  // opaque: else GCC hoists the 11 tests into flags on the stack
#define DLB_TAP(j, s)                                                                          \
  if constexpr (j < NP && s < S) {                                                             \
    a##j##_0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + s * NC), xb, a##j##_0);                    \
    if constexpr (NV > 1) a##j##_1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + s * NC + 8), xb, a##j##_1); \
  }
#define DLB_COL(u, TAPS)                              \
  if constexpr (u < NP + S - 1)                       \
    if (cols & (1u << u)) {                           \
      const __m256 xb = _mm256_broadcast_ss(xr + u);  \
      TAPS                                            \
    }
      DLB_COL(0, DLB_TAP(0, 0))
      DLB_COL(1, DLB_TAP(1, 0) DLB_TAP(0, 1))
      DLB_COL(2, DLB_TAP(2, 0) DLB_TAP(1, 1) DLB_TAP(0, 2))
      DLB_COL(3, DLB_TAP(3, 0) DLB_TAP(2, 1) DLB_TAP(1, 2) DLB_TAP(0, 3))
      DLB_COL(4, DLB_TAP(4, 0) DLB_TAP(3, 1) DLB_TAP(2, 2) DLB_TAP(1, 3) DLB_TAP(0, 4))
      DLB_COL(5, DLB_TAP(5, 0) DLB_TAP(4, 1) DLB_TAP(3, 2) DLB_TAP(2, 3) DLB_TAP(1, 4))
      DLB_COL(6, DLB_TAP(6, 0) DLB_TAP(5, 1) DLB_TAP(4, 2) DLB_TAP(3, 3) DLB_TAP(2, 4))
      DLB_COL(7, DLB_TAP(6, 1) DLB_TAP(5, 2) DLB_TAP(4, 3) DLB_TAP(3, 4))
      DLB_COL(8, DLB_TAP(6, 2) DLB_TAP(5, 3) DLB_TAP(4, 4))
      DLB_COL(9, DLB_TAP(6, 3) DLB_TAP(5, 4))
      DLB_COL(10, DLB_TAP(6, 4))
#undef DLB_COL
#undef DLB_TAP
    }
  }
  const __m256 acc[7][2] = {{a0_0, a0_1}, {a1_0, a1_1}, {a2_0, a2_1}, {a3_0, a3_1},
                            {a4_0, a4_1}, {a5_0, a5_1}, {a6_0, a6_1}};
  for (int i = 0; i < NP; ++i)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + i * NC + 8 * v, acc[i][v]);
}

template <int S, int NV>
DLB_AVX2_FMA_INLINE void backward_data_cols_run_avx2(int np, const float* dy, std::size_t plane, int ld, int nr,
                                                     int lo, int hi, const float* wt, std::size_t wk, std::size_t wr,
                                                     int K, float* out) {
  switch (np) {
#define DLB_CASE(n) \
  case n: return backward_data_cols_block_avx2<n, S, NV>(dy, plane, ld, nr, lo, hi, wt, wk, wr, K, out);
    DLB_CASE(1) DLB_CASE(2) DLB_CASE(3) DLB_CASE(4) DLB_CASE(5) DLB_CASE(6)
#undef DLB_CASE
    default: return backward_data_cols_block_avx2<7, S, NV>(dy, plane, ld, nr, lo, hi, wt, wk, wr, K, out);
  }
}

// conv2d_backward_data_cols_avx2: dx (NCHW, overwritten) of `sh` from dy; wt: rotate_filters_cols_avx2.
// rowbuf: W * 16 floats.
template <int S>
DLB_AVX2_FMA void conv2d_backward_data_cols_avx2(const Conv2dShape& sh, const float* dy, const float* wt, float* dx,
                                                 float* rowbuf) {
  const int K = sh.k, C = sh.c, R = sh.r, P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const int ph = R - 1 - sh.pad_h, pw = S - 1 - sh.pad_w;  // the rotated conv's "full" padding
  const std::size_t PQ = std::size_t(P) * Q, HW = std::size_t(H) * W, wk = std::size_t(R) * S * C, wr = std::size_t(S) * C;
  const int runs = (W + kColsMaxRunAvx2 - 1) / kColsMaxRunAvx2, run = (W + runs - 1) / runs;
  for (int n = 0; n < sh.n; ++n) {
    const float* dyn = dy + std::size_t(n) * K * PQ;
    float* dxn = dx + std::size_t(n) * C * HW;
    for (int c0 = 0; c0 < C;) {
      const int nc = C - c0 >= 16 ? 16 : 8;
      for (int h = 0; h < H; ++h) {
        const int r0 = std::max(0, ph - h), r1 = std::min(R, ph + P - h);  // filter rows inside dy
        const float* d = r1 > r0 ? dyn + std::size_t(h + r0 - ph) * Q : dyn;
        const float* f = wt + std::size_t(r0) * wr + std::size_t(c0) * S;
        for (int w0 = 0; w0 < W; w0 += run) {
          const int np = std::min(run, W - w0);
          const int off = w0 - pw, lo = std::max(0, -off), hi = std::min(np + S - 1, Q - off);
          float* out = rowbuf + std::size_t(w0) * nc;
          if (nc == 16) backward_data_cols_run_avx2<S, 2>(np, d + off, PQ, Q, r1 - r0, lo, hi, f, wk, wr, K, out);
          else backward_data_cols_run_avx2<S, 1>(np, d + off, PQ, Q, r1 - r0, lo, hi, f, wk, wr, K, out);
        }
        for (int v = 0; v < nc; v += 8)
          for (int w0 = 0; w0 < W; w0 += 8)
            transpose8(rowbuf + std::size_t(w0) * nc + v, nc, std::min(8, W - w0), 8,
                       dxn + (c0 + v) * HW + std::size_t(h) * W + w0, HW);
      }
      c0 += nc;
    }
  }
}

// The cols kernel in AVX-512 (w512: 16-channel blocks, filters by rotate_filters_cols16) or AVX2
// (8-channel blocks, rotate_filters_cols_avx2).
void backward_data_cols(const Conv2dShape& sh, const float* dy, const float* wt, float* dx, std::vector<float>& ws,
                        bool w512) {
  if (w512) {
    float* rowbuf = ensure_aligned(ws, std::size_t(sh.w) * 32);
    if (sh.s == 3) return conv2d_backward_data_cols_avx512<3>(sh, dy, wt, dx, rowbuf);
    return conv2d_backward_data_cols_avx512<5>(sh, dy, wt, dx, rowbuf);
  }
  float* rowbuf = ensure_aligned(ws, std::size_t(sh.w) * 16);
  if (sh.s == 3) return conv2d_backward_data_cols_avx2<3>(sh, dy, wt, dx, rowbuf);
  conv2d_backward_data_cols_avx2<5>(sh, dy, wt, dx, rowbuf);
}
#endif
}  // namespace detail

}  // namespace dlb::cpu
