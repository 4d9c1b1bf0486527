// Both gradients of a convolution from a mostly-zero dy, over its nonzeros (fp32 and bf16, AVX-512).
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>
#include <cstring>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {
// ---- both gradients of a convolution from a mostly-zero dy (AVX-512) ----
// Behind ReLU + MaxPool2d(2) a convolution's dy is nonzero at one output in four at most (the
// lecture's conv2: 25 of 100 per channel), and the dense GEMMs spend three quarters of their
// multiply-adds on zeros. Over the nonzeros alone, in channels-last copies of one image so a
// filter tap's C channels are C / 16 contiguous vectors:
//   dW[k][r][s][c] += g * xt[p + r][q + s][c]   per nonzero (k, p, q, g): the image's nonzeros of
//                     channel k, RB taps x CV vectors of accumulators held across them (24 zmm);
//   dxt[h][w][c]   = sum over taps (r, s) and the nonzeros (k, g) at (h - r, w - s) of
//                     g * wt[k][r][s][c]: CV accumulators per pixel, the nonzeros listed per
//                     output position (about K / 4 each).
// Napkin, conv2 (C 128, K 16, 5x5 on 14x14) per image: 400 nonzeros x 25 taps x 8 vectors = 80k
// FMAs of 16 lanes each way against 320k for each dense GEMM. Another summation order from the
// GEMM (within rounding); a zero dy element is skipped, not multiplied (0 x inf is not made NaN).
constexpr double kSparseDyMaxDensity = 0.3;  // nonzero fraction of dy up to which this path runs

// (Where it runs: algos.cpp, sparse_fits: stride 1, no padding, C a multiple of 16, AVX-512.)

// acc[t][c0 .. c0 + 16 CV) += g * xt at tap t's offset from the nonzero's pixel, taps [t0, t0 + RB).
template <int CV, int RB>
DLB_AVX512_INLINE void sparse_dy_filter_taps(const float* xt, int C, int W, int S, int t0, const std::int32_t* pix,
                                             const float* g, int nnz, float* acc) {
  __m512 a[RB][CV];
  std::size_t tap[RB];
#pragma GCC unroll 24
  for (int b = 0; b < RB; ++b) {
    tap[b] = (std::size_t((t0 + b) / S) * W + (t0 + b) % S) * C;
#pragma GCC unroll 8
    for (int v = 0; v < CV; ++v) a[b][v] = _mm512_loadu_ps(acc + std::size_t(b) * C + 16 * v);
  }
  for (int j = 0; j < nnz; ++j) {
    const float* px = xt + std::size_t(pix[j]) * C;
    const __m512 gb = _mm512_set1_ps(g[j]);
#pragma GCC unroll 24
    for (int b = 0; b < RB; ++b)
#pragma GCC unroll 8
      for (int v = 0; v < CV; ++v) a[b][v] = _mm512_fmadd_ps(gb, _mm512_loadu_ps(px + tap[b] + 16 * v), a[b][v]);
  }
#pragma GCC unroll 24
  for (int b = 0; b < RB; ++b)
#pragma GCC unroll 8
    for (int v = 0; v < CV; ++v) _mm512_storeu_ps(acc + std::size_t(b) * C + 16 * v, a[b][v]);
}

// All taps of channel k's nonzeros for channels [c0, c0 + 16 CV): RB = 24 / CV taps a pass.
template <int CV>
DLB_AVX512_T void sparse_dy_filter_chunk(const float* xt, int C, int W, int R, int S, const std::int32_t* pix,
                                         const float* g, int nnz, float* acc) {
  constexpr int RB = 24 / CV;
  int t = 0;
  for (; t + RB <= R * S; t += RB) sparse_dy_filter_taps<CV, RB>(xt, C, W, S, t, pix, g, nnz, acc + std::size_t(t) * C);
  for (; t < R * S; ++t) sparse_dy_filter_taps<CV, 1>(xt, C, W, S, t, pix, g, nnz, acc + std::size_t(t) * C);
}

// dxt[h][w][c0 .. c0 + 16 CV) for one pixel: sum over the taps and the nonzeros at (h - r, w - s).
template <int CV>
DLB_AVX512_T void sparse_dy_data_pixel(const Conv2dShape& sh, int h, int w, const std::int32_t* start,
                                       const std::int32_t* kk, const float* gg, const float* wt, int c0, float* out) {
  const int C = sh.c, R = sh.r, S = sh.s, P = sh.p(), Q = sh.q();
  __m512 a[CV];
#pragma GCC unroll 8
  for (int v = 0; v < CV; ++v) a[v] = _mm512_setzero_ps();
  for (int r = std::max(0, h - P + 1); r <= std::min(R - 1, h); ++r)
    for (int s = std::max(0, w - Q + 1); s <= std::min(S - 1, w); ++s) {
      const int pos = (h - r) * Q + (w - s);
      const float* wrs = wt + (std::size_t(r) * S + s) * C + c0;
      for (int e = start[pos]; e < start[pos + 1]; ++e) {
        const __m512 gb = _mm512_set1_ps(gg[e]);
        const float* wk = wrs + std::size_t(kk[e]) * R * S * C;
#pragma GCC unroll 8
        for (int v = 0; v < CV; ++v) a[v] = _mm512_fmadd_ps(gb, _mm512_loadu_ps(wk + 16 * v), a[v]);
      }
    }
#pragma GCC unroll 8
  for (int v = 0; v < CV; ++v) _mm512_storeu_ps(out + 16 * v, a[v]);
}

// f(std::integral_constant<int, CV>, c0) over C (a multiple of 16) in chunks of 128, 64, 32, 16 channels.
// (The lambdas it takes are not AVX-512 functions: what they call must not be always_inline.)
template <class F>
DLB_AVX512_INLINE void for_channel_chunks(int C, F&& f) {
  int c0 = 0;
  for (; c0 + 128 <= C; c0 += 128) f(std::integral_constant<int, 8>{}, c0);
  for (; c0 + 64 <= C; c0 += 64) f(std::integral_constant<int, 4>{}, c0);
  for (; c0 + 32 <= C; c0 += 32) f(std::integral_constant<int, 2>{}, c0);
  for (; c0 < C; c0 += 16) f(std::integral_constant<int, 1>{}, c0);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (_mm512_undefined_* inside)
#endif
// The same two sums under bf16 autocast (bf16 products, fp32 sums), two nonzeros a vdpbf16ps as in
// pool_grad_rows_bf16: x and the filters rounded to bf16 with their channels spread over 64-byte
// blocks (spread32_bf16: rows of Cs = C rounded up to 32), a pair's two terms' blocks unpacked into
// the pair vectors of both 16-channel halves, its gradients rounded to bf16 and packed (the first in
// the low half). dW pairs consecutive nonzeros of a channel; dX pairs consecutive (tap, nonzero)
// terms of a pixel. An odd last term pairs with zeros.
//
// rows x C floats (C a multiple of 16) to rows x Cs bf16: block b of a row (channels 32b .. 32b + 31)
// holds channels 32b + 4l .. + 3 in the low 64 bits of its 128-bit lane l, and 32b + 16 + 4l .. + 3
// (or zeros past C) in the high ones.
DLB_BF16_T __attribute__((noinline)) void spread32_bf16(const float* src, int C, std::size_t rows, std::uint16_t* dst) {
  const int Cs = (C + 31) / 32 * 32;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; c += 32) {
      const float* p = src + r * C + c;
      store_spread_bf16(p, c + 16 < C ? p + 16 : nullptr, dst + r * Cs + c);
    }
}
template <int CV, int RB>
DLB_BF16_INLINE void sparse_dy_filter_taps_bf16(const std::uint16_t* x16, int C, int Cs, int W, int S, int t0,
                                                const std::int32_t* pix, const std::uint16_t* g16, int nnz,
                                                float* acc) {
  __m512 a[RB][CV];
  std::size_t tap[RB];
#pragma GCC unroll 24
  for (int b = 0; b < RB; ++b) {
    tap[b] = (std::size_t((t0 + b) / S) * W + (t0 + b) % S) * Cs;
#pragma GCC unroll 8
    for (int v = 0; v < CV; ++v) a[b][v] = _mm512_loadu_ps(acc + std::size_t(b) * C + 16 * v);
  }
  for (int j = 0; j < nnz; j += 2) {
    const std::uint16_t* p = x16 + std::size_t(pix[j]) * Cs;
    const std::uint16_t* q = j + 1 < nnz ? x16 + std::size_t(pix[j + 1]) * Cs : nullptr;
    std::uint32_t gp = g16[j];
    if (q) std::memcpy(&gp, g16 + j, sizeof gp);
    const __m512bh gb = broadcast_pair(gp);
#pragma GCC unroll 24
    for (int b = 0; b < RB; ++b) spread_pair_bf16<CV>(p + tap[b], q ? q + tap[b] : nullptr, 32, gb, a[b]);
  }
#pragma GCC unroll 24
  for (int b = 0; b < RB; ++b)
#pragma GCC unroll 8
    for (int v = 0; v < CV; ++v) _mm512_storeu_ps(acc + std::size_t(b) * C + 16 * v, a[b][v]);
}

// x16: the spread image at the chunk's first channel; acc at it too.
template <int CV>
DLB_BF16_T __attribute__((noinline)) void sparse_dy_filter_chunk_bf16(const std::uint16_t* x16, int C, int Cs, int W,
                                                                      int R, int S, const std::int32_t* pix,
                                                                      const std::uint16_t* g16, int nnz, float* acc) {
  constexpr int RB = 24 / CV;
  int t = 0;
  for (; t + RB <= R * S; t += RB)
    sparse_dy_filter_taps_bf16<CV, RB>(x16, C, Cs, W, S, t, pix, g16, nnz, acc + std::size_t(t) * C);
  for (; t < R * S; ++t)
    sparse_dy_filter_taps_bf16<CV, 1>(x16, C, Cs, W, S, t, pix, g16, nnz, acc + std::size_t(t) * C);
}

// wt16: the spread filters ([K][R][S][Cs]) at the chunk's first channel.
template <int CV>
DLB_BF16_T __attribute__((noinline)) void sparse_dy_data_pixel_bf16(const Conv2dShape& sh, int Cs, int h, int w,
                                                                    const std::int32_t* start, const std::int32_t* kk,
                                                                    const std::uint16_t* gg16, const std::uint16_t* wt16,
                                                                    float* out) {
  const int R = sh.r, S = sh.s, P = sh.p(), Q = sh.q();
  __m512 a[CV];
#pragma GCC unroll 8
  for (int v = 0; v < CV; ++v) a[v] = _mm512_setzero_ps();
  const std::uint16_t* pend = nullptr;  // the first term of a pair, waiting for its second
  std::uint32_t gpend = 0;
  for (int r = std::max(0, h - P + 1); r <= std::min(R - 1, h); ++r)
    for (int s = std::max(0, w - Q + 1); s <= std::min(S - 1, w); ++s) {
      const int pos = (h - r) * Q + (w - s);
      const std::uint16_t* wrs = wt16 + (std::size_t(r) * S + s) * Cs;
      for (int e = start[pos]; e < start[pos + 1]; ++e) {
        const std::uint16_t* wk = wrs + std::size_t(kk[e]) * R * S * Cs;
        if (!pend) {
          pend = wk, gpend = gg16[e];
        } else {
          spread_pair_bf16<CV>(pend, wk, 32, broadcast_pair(gpend | std::uint32_t(gg16[e]) << 16), a);
          pend = nullptr;
        }
      }
    }
  if (pend) spread_pair_bf16<CV>(pend, nullptr, 32, broadcast_pair(gpend), a);
#pragma GCC unroll 8
  for (int v = 0; v < CV; ++v) _mm512_storeu_ps(out + 16 * v, a[v]);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Images [0, sh.n) of x/dy (already offset): dw (KCRS) and db overwritten with their sums; dx
// (NCHW, may be null) overwritten. wt: the filters as [K][R][S][C].
// BF: bf16 autocast (the _bf16 kernels above), wt16 the filters rounded to bf16 and spread ([K][R][S][Cs]).
template <bool BF>
DLB_AVX512_T void conv2d_backward_sparse_dy_serial(const Conv2dShape& sh, const float* x, const float* dy,
                                                   const float* wt, const std::uint16_t* wt16, float* dw, float* db,
                                                   float* dx) {
  const int C = sh.c, K = sh.k, H = sh.h, W = sh.w, R = sh.r, S = sh.s, P = sh.p(), Q = sh.q(), RS = R * S;
  const int HW = H * W, PQ = P * Q;
  thread_local std::vector<float> xt_buf, dxt_buf, acc_buf, g_buf, gg_buf;
  thread_local std::vector<std::int32_t> pix_buf, pos_buf, cnt_buf, start_buf, kk_buf;
  float* xt = ensure_aligned(xt_buf, std::size_t(HW) * C);
  float* dxt = dx ? ensure_aligned(dxt_buf, std::size_t(HW) * C) : nullptr;
  float* acc = ensure_aligned(acc_buf, std::size_t(K) * RS * C);  // [K][R][S][C]
  float* g = ensure_aligned(g_buf, std::size_t(K) * PQ);            // per channel: its nonzeros
  float* gg = ensure_aligned(gg_buf, std::size_t(K) * PQ);          // per position: its nonzeros
  pix_buf.resize(std::size_t(K) * PQ), pos_buf.resize(std::size_t(K) * PQ), cnt_buf.resize(K);
  start_buf.resize(std::size_t(PQ) + 1), kk_buf.resize(std::size_t(K) * PQ);
  std::int32_t *pix = pix_buf.data(), *pos = pos_buf.data(), *cnt = cnt_buf.data(), *start = start_buf.data(),
               *kk = kk_buf.data();
  thread_local std::vector<float> x16_buf;
  thread_local std::vector<std::uint16_t> g16_buf, gg16_buf;  // the gradients in bf16 (BF)
  const int Cs = (C + 31) / 32 * 32;  // a spread row (spread32_bf16)
  std::uint16_t* x16 = BF ? ensure_aligned_bf16(x16_buf, std::size_t(HW) * Cs) : nullptr;
  if (BF) g16_buf.resize(std::size_t(K) * (PQ + 1)), gg16_buf.resize(std::size_t(K) * PQ);
  std::fill(acc, acc + std::size_t(K) * RS * C, 0.f);
  std::vector<double> bsum(K, 0.0);
  for (int n = 0; n < sh.n; ++n) {
    const float* xn = x + std::size_t(n) * C * HW;
    const float* dyn = dy + std::size_t(n) * K * PQ;
    for (int c0 = 0; c0 < C; c0 += 16)
      for (int i0 = 0; i0 < HW; i0 += 16)
        simd::Avx512::transpose_tile(xn + std::size_t(c0) * HW + i0, HW, 16, std::min(16, HW - i0),
                                     xt + std::size_t(i0) * C + c0, C);
    if (BF) spread32_bf16(xt, C, std::size_t(HW), x16);
    // the nonzeros, by channel (pixel of the output's top-left tap, position, gradient), then by position
    std::fill(start, start + PQ + 1, 0);
    for (int k = 0; k < K; ++k) {
      int m = 0;
      float sum = 0.f;
      for (int i = 0, row = 0, col = 0; i < PQ; ++i, ++col) {  // (row, col) = (i / Q, i % Q)
        if (col == Q) col = 0, ++row;
        const float v = dyn[std::size_t(k) * PQ + i];
        if (v == 0.f) continue;
        pix[std::size_t(k) * PQ + m] = row * W + col, pos[std::size_t(k) * PQ + m] = i;
        g[std::size_t(k) * PQ + m] = v;
        if (BF) g16_buf[std::size_t(k) * (PQ + 1) + m] = fp32_to_bf16_ref(v);
        ++m, ++start[i + 1], sum += v;
      }
      if (BF) g16_buf[std::size_t(k) * (PQ + 1) + m] = 0;
      cnt[k] = m, bsum[k] += sum;
    }
    for (int i = 0; i < PQ; ++i) start[i + 1] += start[i];
    if (dx) {
      thread_local std::vector<std::int32_t> at_buf;  // each position's next free entry
      at_buf.assign(start, start + PQ);
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < cnt[k]; ++j) {
          const int e = at_buf[pos[std::size_t(k) * PQ + j]]++;
          kk[e] = k, gg[e] = g[std::size_t(k) * PQ + j];
          if (BF) gg16_buf[e] = g16_buf[std::size_t(k) * (PQ + 1) + j];
        }
    }
    for (int k = 0; k < K; ++k) {
      const std::int32_t* pk = pix + std::size_t(k) * PQ;
      const float* gk = g + std::size_t(k) * PQ;
      float* ak = acc + std::size_t(k) * RS * C;
      const std::uint16_t* g16k = BF ? g16_buf.data() + std::size_t(k) * (PQ + 1) : nullptr;
      for_channel_chunks(C, [&](auto cv, int c0) {
        if (BF)
          sparse_dy_filter_chunk_bf16<decltype(cv)::value>(x16 + c0, C, Cs, W, R, S, pk, g16k, cnt[k], ak + c0);
        else
          sparse_dy_filter_chunk<decltype(cv)::value>(xt + c0, C, W, R, S, pk, gk, cnt[k], ak + c0);
      });
    }
    if (!dx) continue;
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) {
        float* out = dxt + (std::size_t(h) * W + w) * C;
        for_channel_chunks(C, [&](auto cv, int c0) {
          if (BF)
            sparse_dy_data_pixel_bf16<decltype(cv)::value>(sh, Cs, h, w, start, kk, gg16_buf.data(), wt16 + c0, out + c0);
          else
            sparse_dy_data_pixel<decltype(cv)::value>(sh, h, w, start, kk, gg, wt, c0, out + c0);
        });
      }
    if (BF) round_bf16_in_place(dxt, std::size_t(HW) * C);  // autocast's conv returns dx in bf16
    float* dxn = dx + std::size_t(n) * C * HW;
    for (int i0 = 0; i0 < HW; i0 += 16)
      for (int c0 = 0; c0 < C; c0 += 16)
        simd::Avx512::transpose_tile(dxt + std::size_t(i0) * C + c0, C, std::min(16, HW - i0), 16,
                                     dxn + std::size_t(c0) * HW + i0, HW);
  }
  for (int k = 0; k < K; ++k)  // [K][R][S][C] -> KCRS, 16 x 16 blocks (strided single floats were ~5% of a step)
    for (int t0 = 0; t0 < RS; t0 += 16)
      for (int c0 = 0; c0 < C; c0 += 16)
        simd::Avx512::transpose_tile(acc + (std::size_t(k) * RS + t0) * C + c0, C, std::min(16, RS - t0), 16,
                                     dw + (std::size_t(k) * C + c0) * RS + t0, RS);
  if (db)
    for (int k = 0; k < K; ++k) db[k] = float(bsum[k]);
}

template <bool BF>
bool backward_sparse_dy(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw, float* db,
                        float* dx) {
  const std::size_t ny = sh.y_size();
  std::size_t nz = 0;
  for (std::size_t i = 0; i < ny; ++i) nz += dy[i] != 0.f;
  if (double(nz) > kSparseDyMaxDensity * double(ny)) return false;
  const int C = sh.c, RS = sh.r * sh.s;
  thread_local std::vector<float> wt_buf;  // [K][R][S][C], the calling thread's
  float* wt = ensure_aligned(wt_buf, std::size_t(sh.k) * RS * C);
  for (int k = 0; k < sh.k; ++k)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < RS; ++t) wt[(std::size_t(k) * RS + t) * C + c] = w[(std::size_t(k) * C + c) * RS + t];
  thread_local std::vector<float> wt16_buf;
  std::uint16_t* wt16 = BF ? ensure_aligned_bf16(wt16_buf, std::size_t(sh.k) * RS * ((C + 31) / 32 * 32)) : nullptr;
  if (BF) spread32_bf16(wt, C, std::size_t(sh.k) * RS, wt16);
  const std::size_t xi = std::size_t(C) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  backward_filter_tasks(sh, dw, db, thread_ws(),
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>&) {
                          conv2d_backward_sparse_dy_serial<BF>(s, x + i0 * xi, dy + i0 * yi, wt, wt16, pdw, pdb,
                                                               dx ? dx + i0 * xi : nullptr);
                        });
  return true;
}

bool sparse_dy_run(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw, float* db,
                   float* dx, bool bf16) {
  if (bf16) return backward_sparse_dy<true>(sh, x, w, dy, dw, db, dx);
  return backward_sparse_dy<false>(sh, x, w, dy, dw, db, dx);
}
}  // namespace detail
#endif

bool conv2d_backward_sparse_dy_shape(const Conv2dShape& sh, bool bf16) {
  return choose(sh, bf16 ? ConvDir::sparse_dy_bf16 : ConvDir::sparse_dy, isa_active()) != Algo::auto_;
}

namespace {
bool sparse_dy_entry(ConvDir dir, Algo algo, const Conv2dShape& sh, const float* x, const float* w, const float* dy,
                     float* dw, float* db, float* dx) {
  check_shape(sh);
  const AlgoRow* row = resolve(algo, sh, dir, 0);
  if (!row) return false;
  ConvCall c;
  c.sh = sh, c.x = x, c.w = w, c.dy = dy, c.out = dw, c.db = db, c.dx = dx;
  return row->run(c);
}
}  // namespace

bool conv2d_backward_sparse_dy(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                               float* db, float* dx, Algo algo) {
  return sparse_dy_entry(ConvDir::sparse_dy, algo, sh, x, w, dy, dw, db, dx);
}
bool conv2d_backward_sparse_dy_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                                    float* db, float* dx, Algo algo) {
  return sparse_dy_entry(ConvDir::sparse_dy_bf16, algo, sh, x, w, dy, dw, db, dx);
}

}  // namespace dlb::cpu
