// A first convolution fused with ReLU + MaxPool2d: forward and backward-filter over the pool's
// winners (fp32 AVX2 / AVX-512, and bf16 with vdpbf16ps).
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {
// ---- backward-filter from a pooled gradient, over the pool's winners only (AVX2) ----
// Behind ReLU + MaxPool2d(pk) the convolution's dy is nonzero only at each window's winner, and only
// where the pooled y > 0: at most one conv output in pk*pk. So dW[k][c][r][s] += g * x[c][ph + r][pw + s]
// runs over the winners alone (a quarter of the dense GEMM's multiply-adds for pk = 2, and neither a
// dense dy nor an im2col is written): per winner one FMA per filter row (c, r), the S <= 8 taps of
// the row in the lanes of one vector loaded at x[c][ph + r][pw] (the lanes past S accumulate
// neighbours into padding that is dropped), up to 8 row vectors of one output channel held in
// registers across all its windows. Windows whose winner ReLU stopped multiply by 0 rather than
// branch. A different summation order from the dense GEMM: equal to it within rounding, not bit for
// bit. (Measurements: docs/notes/2026-11-25-conv-cpu.md.)
//
// Filter rows [T0, T1) (row t = channel t / R, filter row t % R) of one output channel: acc[t][0..7]
// += sum over the winners of gm[jj] * x[xp + off[jj] + row offset][0..7]. At most 8 rows a pass: with
// all 15 of a 3 x 5 filter in one pass GCC spilled two accumulators (a store-to-load chain per winner).
template <int R, int T0, int T1>
DLB_AVX2_FMA_INLINE void pool_grad_rows(const float* xp, std::size_t HW, int W, const std::int32_t* off,
                                        const float* gm, int nwin, float* acc) {
  __m256 a[T1 - T0 > 0 ? T1 - T0 : 1];
#pragma GCC unroll 8
  for (int t = T0; t < T1; ++t) a[t - T0] = _mm256_load_ps(acc + 8 * t);
  for (int jj = 0; jj < nwin; ++jj) {
    const float* p = xp + off[jj];
    const __m256 gb = _mm256_broadcast_ss(gm + jj);
#pragma GCC unroll 8
    for (int t = T0; t < T1; ++t)
      a[t - T0] = _mm256_fmadd_ps(gb, _mm256_loadu_ps(p + std::size_t(t / R) * HW + std::size_t(t % R) * W), a[t - T0]);
  }
#pragma GCC unroll 8
  for (int t = T0; t < T1; ++t) _mm256_store_ps(acc + 8 * t, a[t - T0]);
}

template <int C, int R>
DLB_AVX2_FMA void pool_grad_filter_sparse(const Conv2dShape& sh, const float* x, int pk, const float* dy,
                                          const float* y, const std::int32_t* arg, long i0, float* dw, float* db) {
  constexpr int NR = C * R;
  const int K = sh.k, H = sh.h, W = sh.w, S = sh.s, P = sh.p(), Q = sh.q(), pp = P / pk, pq = Q / pk;
  const std::size_t HW = std::size_t(H) * W, xi = C * HW, PQ = std::size_t(P) * Q, yi = std::size_t(K) * pp * pq;
  thread_local std::vector<float> acc_buf, x_buf, gm_buf;
  thread_local std::vector<std::int32_t> off_buf;
  float* acc = ensure_aligned(acc_buf, std::size_t(K) * NR * 8);  // [K][C*R][8]
  float* gm = ensure_aligned(gm_buf, std::size_t(pp) * pq);       // one channel's winners: gradient,
  if (off_buf.size() < std::size_t(pp) * pq) off_buf.resize(std::size_t(pp) * pq);
  std::int32_t* off = off_buf.data();                              // and offset into the image
  float* xp = ensure_aligned(x_buf, xi + 8);  // the image, then 8 zeros the last row's vector reads into
  std::fill(acc, acc + std::size_t(K) * NR * 8, 0.f);
  std::fill(xp + xi, xp + xi + 8, 0.f);
  if (db) std::fill(db, db + K, 0.f);
  for (int n = 0; n < sh.n; ++n) {
    const std::size_t img = std::size_t(i0 + n);
    std::memcpy(xp, x + n * xi, sizeof(float) * xi);
    for (int k = 0; k < K; ++k) {
      const std::size_t o = img * yi + std::size_t(k) * pp * pq;
      const float* g = dy + o;
      const float* yk = y + o;
      const std::int32_t* ak = arg + o;
      const std::int32_t base = std::int32_t((img * K + k) * PQ);
      float* ac = acc + std::size_t(k) * NR * 8;
      // First the winners' offsets into the image and their gradients (0 where ReLU stopped them),
      // branch-free: which window element won, and whether ReLU passed it, are data (branches on
      // them mispredicted half the time: slower than the dense GEMM). Then the FMAs, with nothing
      // else live beside the accumulators and the broadcast.
      float bsum = 0.f;
      for (int i = 0; i < pp; ++i)
        for (int j = 0; j < pq; ++j) {
          const int jj = i * pq + j;
          int rel = ak[jj] - base - (i * pk * Q + j * pk), dr = 0;  // the winner within its window
          for (int d = 1; d < pk; ++d) {
            const int down = rel >= Q;
            rel -= down * Q, dr += down;
          }
          off[jj] = (i * pk + dr) * W + j * pk + rel;
          const __m128 gs = _mm_and_ps(_mm_cmpgt_ss(_mm_load_ss(yk + jj), _mm_setzero_ps()), _mm_load_ss(g + jj));
          _mm_store_ss(gm + jj, gs);
          bsum += _mm_cvtss_f32(gs);
        }
      pool_grad_rows<R, 0, (NR < 8 ? NR : 8)>(xp, HW, W, off, gm, pp * pq, ac);
      if (NR > 8) pool_grad_rows<R, 8, NR>(xp, HW, W, off, gm, pp * pq, ac);
      if (db) db[k] += bsum;
    }
  }
  for (int k = 0; k < K; ++k)
    for (int t = 0; t < NR; ++t)
      for (int s = 0; s < S; ++s) dw[(std::size_t(k) * NR + t) * S + s] = acc[(std::size_t(k) * NR + t) * 8 + s];
}

// The same sum in AVX-512, G = 16 / S filter rows of one channel in the lanes of one vector (S = 5:
// rows r..r+2, 15 lanes of 16; S = 3: all three rows): per winner C x ceil(R / G) FMAs of 16 lanes
// (6 for a 3 x 5 x 5 filter) against the AVX2 kernel's C x R of 8 (15). The vectors come from a
// copy of the image laid out for it, E[c][h][w][16] with lane g*S + s = x[c][h + g][w + s], built
// once per image (C x (P + R - G) x Q vectors: 167 KB for conv1, L2), so each is one aligned load
// at E + the winner's flat index in the convolution's output (ph * Q + pw: arg - the plane's base,
// no decoding), and the per-channel setup (offsets, ReLU-masked gradients) is 16 windows a step.
// Lanes past the filter's rows or taps gather neighbours or zeros and are dropped. The loads, one
// cache line each from L2, set the pace. (Measurements: docs/notes/2026-11-25-conv-cpu.md.)
template <int C, int R, int S>
struct PoolGradLanes512 {
  static constexpr int G = 16 / S < R ? 16 / S : R;  // filter rows a vector
  static constexpr int NV = (R + G - 1) / G;         // vectors a channel
  static constexpr int NT = C * NV;                  // vectors a filter
};

// E (above) for rows [0, HN) and columns [0, Q) of one image; xp: the image then G rows of zeros.
template <int C, int R, int S>
DLB_AVX512_T void pool_grad_lanes512(const float* xp, int H, int W, int Q, int HN, float* e) {
  constexpr int G = PoolGradLanes512<C, R, S>::G;
  const std::size_t HW = std::size_t(H) * W;
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < HN; ++h) {
      const float* row = xp + c * HW + std::size_t(h) * W;
      for (int w = 0; w < Q; ++w, e += 16) {
        __m512 v = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)  // lanes g*S .. g*S + S - 1 from row h + g, columns w .. w + S - 1
          v = _mm512_mask_loadu_ps(v, __mmask16(((1u << S) - 1) << (g * S)), row + std::size_t(g) * W + w - g * S);
        _mm512_store_ps(e, v);
      }
    }
}

// acc[t] += sum over the winners of gm[jj] * E[off[jj] + vector t's channel and row group], two
// interleaved sets of accumulators (consecutive winners' FMAs do not wait on each other).
template <int NT, int NV, int G>
DLB_AVX512_INLINE void pool_grad_rows512(const float* e, std::size_t cstride, std::size_t rstride,
                                         const std::int32_t* off, const float* gm, int nwin, float* acc) {
  __m512 a[NT], b[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) a[t] = _mm512_load_ps(acc + 16 * t), b[t] = _mm512_setzero_ps();
  int jj = 0;
  for (; jj + 2 <= nwin; jj += 2) {
    const float* p = e + std::size_t(off[jj]) * 16;
    const float* q = e + std::size_t(off[jj + 1]) * 16;
    const __m512 ga = _mm512_set1_ps(gm[jj]), gb = _mm512_set1_ps(gm[jj + 1]);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const std::size_t o = std::size_t(t / NV) * cstride + std::size_t(t % NV) * G * rstride;
      a[t] = _mm512_fmadd_ps(ga, _mm512_load_ps(p + o), a[t]);
      b[t] = _mm512_fmadd_ps(gb, _mm512_load_ps(q + o), b[t]);
    }
  }
  if (jj < nwin) {
    const float* p = e + std::size_t(off[jj]) * 16;
    const __m512 ga = _mm512_set1_ps(gm[jj]);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t)
      a[t] = _mm512_fmadd_ps(ga, _mm512_load_ps(p + std::size_t(t / NV) * cstride + std::size_t(t % NV) * G * rstride),
                             a[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm512_store_ps(acc + 16 * t, _mm512_add_ps(a[t], b[t]));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (_mm512_undefined_* inside)
#endif
// The same sum in bf16 (autocast's conv: bf16 products, fp32 sums), two winners a vdpbf16ps: the
// vector of winner pair (2i, 2i + 1) holds their values lane pair by lane pair, multiplied with the
// pair of their gradients (rounded to bf16, nearest even, the first in the low half). From a bf16
// copy of E laid out so that two winners' entries unpack into those vectors (pool_grad_spread_bf16):
// half the bytes loaded and half the FMAs of the fp32 loop. An odd last winner pairs with zeros.
// (Measurements, and the permute / 32-bit-lane variants tried: docs/notes/2026-11-25-conv-cpu.md.)
// The winners' vectors for pool_grad_rows_bf16, two to an entry (S16): entry u of output position o
// holds vector t = 2u in the low 64 bits of each 128-bit lane and t = 2u + 1 (or zeros) in the high
// ones, 4 bf16 each (lane l: values 4l .. 4l + 3). vpunpcklwd / vpunpckhwd of two winners' entries
// then give both vectors' pairs lane by lane, in order: no cross-lane permute. Built per image from E
// (vector t = channel t / NV, row group t % NV, G rows down).
template <int NT, int NV, int G>
DLB_BF16_T __attribute__((noinline)) void pool_grad_spread_bf16(const float* e, std::size_t cstride,
                                                                std::size_t rstride, std::size_t npos,
                                                                std::uint16_t* s16) {
  constexpr int NU = (NT + 1) / 2;
  for (int u = 0; u < NU; ++u) {
    const int t0 = 2 * u, t1 = 2 * u + 1;
    const float* p0 = e + std::size_t(t0 / NV) * cstride + std::size_t(t0 % NV) * G * rstride;
    const float* p1 = t1 < NT ? e + std::size_t(t1 / NV) * cstride + std::size_t(t1 % NV) * G * rstride : nullptr;
    std::uint16_t* out = s16 + std::size_t(u) * npos * 32;
    for (std::size_t o = 0; o < npos; ++o) store_spread_bf16(p0 + o * 16, p1 ? p1 + o * 16 : nullptr, out + o * 32);
  }
}
// s16: pool_grad_spread_bf16's entries (ustride bf16 between entry u and u + 1 of a position);
// g16: room for nwin + 32 bf16 (64-byte aligned).
template <int NT>
DLB_BF16_T __attribute__((noinline)) void pool_grad_rows_bf16(const std::uint16_t* s16, std::size_t ustride,
                                                              const std::int32_t* off, const float* gm, int nwin,
                                                              std::uint16_t* g16, float* acc) {
  for (int j = 0; j < nwin; j += 16) {
    const __mmask16 m = nwin - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (nwin - j)) - 1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(g16 + j),
                       reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, gm + j))));
  }
  g16[nwin] = 0;  // an odd last winner's partner
  std::uint32_t gp[2];
  __m512 a[NT], b[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) a[t] = _mm512_load_ps(acc + 16 * t), b[t] = _mm512_setzero_ps();
  int jj = 0;
  for (; jj + 4 <= nwin; jj += 4) {
    std::memcpy(gp, g16 + jj, sizeof gp);
    spread_pair_bf16<NT>(s16 + std::size_t(off[jj]) * 32, s16 + std::size_t(off[jj + 1]) * 32, ustride,
                         broadcast_pair(gp[0]), a);
    spread_pair_bf16<NT>(s16 + std::size_t(off[jj + 2]) * 32, s16 + std::size_t(off[jj + 3]) * 32, ustride,
                         broadcast_pair(gp[1]), b);
  }
  for (; jj < nwin; jj += 2) {
    std::memcpy(gp, g16 + jj, sizeof(std::uint32_t));
    spread_pair_bf16<NT>(s16 + std::size_t(off[jj]) * 32, jj + 1 < nwin ? s16 + std::size_t(off[jj + 1]) * 32 : nullptr,
                         ustride, broadcast_pair(gp[0]), a);
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) _mm512_store_ps(acc + 16 * t, _mm512_add_ps(a[t], b[t]));
}

// n floats (a multiple of 16) rounded to bf16 (nearest even) in place.
DLB_BF16_T __attribute__((noinline)) void round_bf16_in_place(float* v, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) _mm512_storeu_ps(v + i, rounded_bf16(_mm512_loadu_ps(v + i)));
}
// A 64-byte aligned run of n bf16 in ws.
std::uint16_t* ensure_aligned_bf16(std::vector<float>& ws, std::size_t n) {
  return reinterpret_cast<std::uint16_t*>(ensure_aligned(ws, (n + 1) / 2));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's _mm512_reduce_add_ps (an undefined vector inside)
#endif
// pool_grad_filter_sparse's contract (S = the template's) in AVX-512, by another algorithm, not the
// AVX2 one at a wider vector (so not one body over simd.h's widths, as the conv kernels elsewhere
// are): each image is first copied into a layout of 16/S filter rows a vector, indexed by the
// winner's output position, with two interleaved accumulator sets, a set-up the bf16 kernel shares;
// the AVX2 body loads a filter row a vector straight from the image, computes each winner's offset
// in scalar code, and also takes non-square filters. Their summation orders differ.
template <int C, int R, int S, bool BF = false>
DLB_AVX512_T void pool_grad_filter_sparse512(const Conv2dShape& sh, const float* x, int pk, const float* dy,
                                             const float* y, const std::int32_t* arg, long i0, float* dw, float* db) {
  using L = PoolGradLanes512<C, R, S>;
  constexpr int G = L::G, NV = L::NV, NT = L::NT;
  const int K = sh.k, H = sh.h, W = sh.w, P = sh.p(), Q = sh.q(), pp = P / pk, pq = Q / pk, nw = pp * pq;
  const int HN = P + (NV - 1) * G;  // E's rows: the last row group of the last window's row
  const std::size_t HW = std::size_t(H) * W, xi = C * HW, PQ = std::size_t(P) * Q, yi = std::size_t(K) * nw;
  thread_local std::vector<float> acc_buf, e_buf, x_buf, gm_buf;
  thread_local std::vector<std::int32_t> off_buf;
  float* acc = ensure_aligned(acc_buf, std::size_t(K) * NT * 16);  // [K][NT][16]
  float* e = ensure_aligned(e_buf, std::size_t(C) * HN * Q * 16);
  float* xp = ensure_aligned(x_buf, xi + std::size_t(G) * W + 16);  // rows past the image read zeros
  float* gm = ensure_aligned(gm_buf, std::size_t(nw) + 16);
  thread_local std::vector<float> e16_buf;
  thread_local std::vector<std::uint16_t> g16_buf;
  const std::size_t npos = std::size_t(P) * Q, ustride = npos * 32;  // S16 entries (pool_grad_spread_bf16)
  std::uint16_t* e16 = BF ? ensure_aligned_bf16(e16_buf, std::size_t((NT + 1) / 2) * ustride) : nullptr;
  if (BF && g16_buf.size() < std::size_t(nw) + 64) g16_buf.resize(std::size_t(nw) + 64);
  std::uint16_t* g16 = BF ? reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(g16_buf.data()) + 63) & ~std::uintptr_t(63)) : nullptr;
  if (off_buf.size() < std::size_t(nw) + 16) off_buf.resize(std::size_t(nw) + 16);
  std::int32_t* off = off_buf.data();
  std::fill(acc, acc + std::size_t(K) * NT * 16, 0.f);
  std::fill(xp + xi, xp + xi + std::size_t(G) * W + 16, 0.f);
  if (db) std::fill(db, db + K, 0.f);
  const std::size_t cstride = std::size_t(HN) * Q * 16, rstride = std::size_t(Q) * 16;
  for (int n = 0; n < sh.n; ++n) {
    const std::size_t img = std::size_t(i0 + n);
    std::memcpy(xp, x + n * xi, sizeof(float) * xi);
    pool_grad_lanes512<C, R, S>(xp, H, W, Q, HN, e);
    if (BF) pool_grad_spread_bf16<NT, NV, G>(e, cstride, rstride, npos, e16);
    for (int k = 0; k < K; ++k) {
      const std::size_t o = img * yi + std::size_t(k) * nw;
      const __m512i base = _mm512_set1_epi32(std::int32_t((img * K + k) * PQ));
      __m512 bsum = _mm512_setzero_ps();
      for (int j = 0; j < nw; j += 16) {
        const __mmask16 m = nw - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (nw - j)) - 1);
        _mm512_mask_storeu_epi32(off + j, m, _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, arg + o + j), base));
        const __m512 yv = _mm512_maskz_loadu_ps(m, y + o + j), gv = _mm512_maskz_loadu_ps(m, dy + o + j);
        const __m512 gz = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(yv, _mm512_setzero_ps(), _CMP_GT_OQ), gv);
        _mm512_mask_storeu_ps(gm + j, m, gz);
        bsum = _mm512_add_ps(bsum, gz);
      }
      if (BF) pool_grad_rows_bf16<NT>(e16, ustride, off, gm, nw, g16, acc + std::size_t(k) * NT * 16);
      else pool_grad_rows512<NT, NV, G>(e, cstride, rstride, off, gm, nw, acc + std::size_t(k) * NT * 16);
      if (db) db[k] += _mm512_reduce_add_ps(bsum);
    }
  }
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s)
          dw[((std::size_t(k) * C + c) * R + r) * S + s] =
              acc[(std::size_t(k) * NT + c * NV + r / G) * 16 + (r % G) * S + s];
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The winners instances for the shape's C x R (those of first layers: RGB or grey, 3x3 or 5x5), or
// null: AVX-512 for square filters, AVX2 for S <= 8 (algos.cpp says where each runs).
SparseFilterFn pool_winners512(const Conv2dShape& sh) {
  if (!(sh.r == sh.s && (sh.c == 3 || sh.c == 1) && (sh.r == 5 || sh.r == 3))) return nullptr;
  if (sh.c == 3) return sh.r == 5 ? pool_grad_filter_sparse512<3, 5, 5> : pool_grad_filter_sparse512<3, 3, 3>;
  return sh.r == 5 ? pool_grad_filter_sparse512<1, 5, 5> : pool_grad_filter_sparse512<1, 3, 3>;
}
SparseFilterFn pool_winners_avx2(const Conv2dShape& sh) {
  if (sh.s > 8) return nullptr;
  if (sh.c == 3 && sh.r == 5) return pool_grad_filter_sparse<3, 5>;
  if (sh.c == 3 && sh.r == 3) return pool_grad_filter_sparse<3, 3>;
  if (sh.c == 1 && sh.r == 5) return pool_grad_filter_sparse<1, 5>;
  if (sh.c == 1 && sh.r == 3) return pool_grad_filter_sparse<1, 3>;
  return nullptr;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (_mm512_undefined_* inside)
#endif
// ---- the fused forward of a first conv + ReLU + MaxPool2d under bf16 autocast (vdpbf16ps) ----
// The fp32 fused forward's GEMM (forward_col_block512: 4 filters x NV vectors of 16 pixels) with the
// reduction over the C*R*S taps taken two at a time: the im2col panel holds tap pairs (2u, 2u + 1)
// of each pixel in a 32-bit lane (bf16, the first in the low half; a zero tap after an odd last
// one), the filters the same pairs, broadcast. Half the FMA instructions of fp32 over the same
// panel bytes. The outputs (bias added in fp32) are rounded to bf16 as autocast's conv returns
// them, then pooled in cache as in conv2d_forward_relu_pool.
template <int NV>
DLB_BF16_INLINE void forward_col_block_bf16(const std::uint32_t* wp, int T2, const std::uint32_t* colp, std::size_t ldc,
                                            const float* bias, float* y, std::size_t ldy, __mmask16 last) {
  __m512 a0[NV], a1[NV], a2[NV], a3[NV];
  const __m512 z0 = _mm512_set1_ps(bias ? bias[0] : 0.f), z1 = _mm512_set1_ps(bias ? bias[1] : 0.f),
               z2 = _mm512_set1_ps(bias ? bias[2] : 0.f), z3 = _mm512_set1_ps(bias ? bias[3] : 0.f);
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) a0[j] = z0, a1[j] = z1, a2[j] = z2, a3[j] = z3;
  for (int u = 0; u < T2; ++u, colp += ldc) {
    const __m512bh b0 = broadcast_pair(wp[u]), b1 = broadcast_pair(wp[T2 + u]), b2 = broadcast_pair(wp[2 * T2 + u]),
                   b3 = broadcast_pair(wp[3 * T2 + u]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const __m512bh v = reinterpret_cast<__m512bh>(_mm512_load_si512(colp + 16 * j));
      a0[j] = _mm512_dpbf16_ps(a0[j], v, b0);
      a1[j] = _mm512_dpbf16_ps(a1[j], v, b1);
      a2[j] = _mm512_dpbf16_ps(a2[j], v, b2);
      a3[j] = _mm512_dpbf16_ps(a3[j], v, b3);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    const __mmask16 m = j == NV - 1 ? last : __mmask16(0xFFFF);
    _mm512_mask_storeu_ps(y + 16 * j, m, rounded_bf16(a0[j]));
    _mm512_mask_storeu_ps(y + ldy + 16 * j, m, rounded_bf16(a1[j]));
    _mm512_mask_storeu_ps(y + 2 * ldy + 16 * j, m, rounded_bf16(a2[j]));
    _mm512_mask_storeu_ps(y + 3 * ldy + 16 * j, m, rounded_bf16(a3[j]));
  }
}

DLB_BF16_T void forward_col_run_bf16(int nv, const std::uint32_t* wp, int T2, const std::uint32_t* colp,
                                     std::size_t ldc, const float* bias, float* y, std::size_t ldy, __mmask16 last) {
  switch (nv) {
    case 1: return forward_col_block_bf16<1>(wp, T2, colp, ldc, bias, y, ldy, last);
    case 2: return forward_col_block_bf16<2>(wp, T2, colp, ldc, bias, y, ldy, last);
    case 3: return forward_col_block_bf16<3>(wp, T2, colp, ldc, bias, y, ldy, last);
    case 4: return forward_col_block_bf16<4>(wp, T2, colp, ldc, bias, y, ldy, last);
    case 5: return forward_col_block_bf16<5>(wp, T2, colp, ldc, bias, y, ldy, last);
    default: return forward_col_block_bf16<6>(wp, T2, colp, ldc, bias, y, ldy, last);
  }
}

// One image's C planes of hw floats (C % 16 == 0) to bf16 in nChw16c ([C/16][hw][16]), nearest even.
DLB_BF16_T __attribute__((noinline)) void planes_to_nchw16c_bf16(const float* y, int C, int hw, std::uint16_t* y16) {
  for (int c0 = 0; c0 < C; c0 += 16)
    for (int p0 = 0; p0 < hw; p0 += 16) {
      const int np = std::min(16, hw - p0);
      const __mmask16 m = __mmask16((1u << np) - 1);
      __m512 a[16];
      for (int l = 0; l < 16; ++l) a[l] = _mm512_maskz_loadu_ps(m, y + std::size_t(c0 + l) * hw + p0);
      transpose16x16(a);
      std::uint16_t* out = y16 + (std::size_t(c0 / 16) * hw + p0) * 16;
      for (int j = 0; j < np; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + std::size_t(j) * 16),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(a[j])));
    }
}

// One image: col (fp32 im2col, T x PQ) to tap pairs colp ((T + 1) / 2 x ldc, ldc = PQ rounded up to
// 16; zeros past PQ), then the GEMM into out (K x PQ, rounded to bf16). wp: the filters' tap pairs.
DLB_BF16_T __attribute__((noinline)) void forward_col_image_bf16(const float* col, int T, std::size_t PQ, int K,
                                                                 const std::uint32_t* wp, const float* bias,
                                                                 std::uint32_t* colp, std::size_t ldc, float* out) {
  const int T2 = (T + 1) / 2;
  const __m512i ix = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5,
                                      36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  for (int u = 0; u < T2; ++u)
    for (std::size_t p = 0; p < PQ; p += 16) {
      const __mmask16 m = PQ - p >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (PQ - p)) - 1);
      const __m512i a = _mm512_zextsi256_si512(
          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, col + std::size_t(2 * u) * PQ + p))));
      const __m512i b = 2 * u + 1 < T ? _mm512_zextsi256_si512(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(
                                            _mm512_maskz_loadu_ps(m, col + std::size_t(2 * u + 1) * PQ + p))))
                                      : _mm512_setzero_si512();
      _mm512_store_si512(colp + std::size_t(u) * ldc + p, _mm512_permutex2var_epi16(a, ix, b));
    }
  for_pixel_blocks(PQ, [&](std::size_t p0, int nv, __mmask16 last) {
    for (int k0 = 0; k0 < K; k0 += 4)
      forward_col_run_bf16(nv, wp + std::size_t(k0) * T2, T2, colp + p0, ldc, bias ? bias + k0 : nullptr,
                           out + std::size_t(k0) * PQ + p0, PQ, last);
  });
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Its bf16 instance (pool_grad_rows_bf16), for the same square filters.
SparseFilterFn pool_winners_bf16(const Conv2dShape& sh) {
  if (!(sh.r == sh.s && (sh.c == 3 || sh.c == 1) && (sh.r == 5 || sh.r == 3))) return nullptr;
  if (sh.c == 3) return sh.r == 5 ? pool_grad_filter_sparse512<3, 5, 5, true> : pool_grad_filter_sparse512<3, 3, 3, true>;
  return sh.r == 5 ? pool_grad_filter_sparse512<1, 5, 5, true> : pool_grad_filter_sparse512<1, 3, 3, true>;
}
}  // namespace detail
#endif

#ifdef DLB_DIRECT_KERNELS
namespace detail {
void relu_pool_forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k, float* y,
                           std::int32_t* arg, bool w512) {
  const int K = sh.k, P = sh.p(), Q = sh.q(), T = sh.c * sh.r * sh.s;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, PQ = std::size_t(P) * Q, yi = std::size_t(K) * (P / k) * (Q / k);
  auto image = [&](int n) {
    thread_local std::vector<float> out_buf;  // one image's convolution output (400 KB for conv1: L2)
    float* col = ensure_aligned(thread_ws(), std::size_t(T) * PQ);
    float* out = ensure_aligned(out_buf, std::size_t(K) * PQ);
    forward_col(sub_batch(sh, n, n + 1), x + n * xi, w, bias, out, col, w512);
    maxpool2d_relu_forward_image(out, y + n * yi, arg + n * yi, K, P, Q, k, std::int32_t(std::size_t(n) * K * PQ));
  };
  if (!parallel_conv(sh)) {
    for (int n = 0; n < sh.n; ++n) image(n);
    return;
  }
  parallel_tasks(sh.n, image);
}

void relu_pool_backward_filter(const Conv2dShape& sh, const float* x, int k, const float* dy, const float* y,
                               const std::int32_t* arg, float* dw, float* db, SparseFilterFn sparse, bool col512) {
  const int K = sh.k, P = sh.p(), Q = sh.q();
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, PQ = std::size_t(P) * Q, yi = std::size_t(K) * (P / k) * (Q / k);
  // over the winners alone where `sparse` is given, else the dense gradient image by image
  backward_filter_tasks(sh, dw, db, thread_ws(),
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>& ws) {
                          if (sparse) return sparse(s, x + i0 * xi, k, dy, y, arg, i0, pdw, pdb);
                          thread_local std::vector<float> dense_buf;  // one image's dense dy (L2)
                          float* dense = ensure_aligned(dense_buf, std::size_t(K) * PQ);
                          const DyImage dy_of = [&](int n) {
                            const std::size_t img = std::size_t(i0 + n);
                            maxpool2d_relu_backward_image(dy + img * yi, y + img * yi, arg + img * yi, dense, K, P, Q,
                                                          k, std::int32_t(img * K * PQ));
                            return static_cast<const float*>(dense);
                          };
                          backward_filter_col(s, x + i0 * xi, dy_of, pdw, pdb, ws, col512);
                        });
}

void relu_pool_forward_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k, float* y,
                            std::int32_t* arg, std::uint16_t* y16) {
  const int K = sh.k, P = sh.p(), Q = sh.q(), T = sh.c * sh.r * sh.s, T2 = (T + 1) / 2;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, PQ = std::size_t(P) * Q, yi = std::size_t(K) * (P / k) * (Q / k);
  const std::size_t ldc = (PQ + 15) / 16 * 16;
  std::vector<std::uint32_t> wp(std::size_t(K) * T2);  // the filters' tap pairs, bf16
  for (int kk = 0; kk < K; ++kk)
    for (int u = 0; u < T2; ++u) {
      const std::uint32_t lo = fp32_to_bf16_ref(w[std::size_t(kk) * T + 2 * u]);
      const std::uint32_t hi = 2 * u + 1 < T ? fp32_to_bf16_ref(w[std::size_t(kk) * T + 2 * u + 1]) : 0u;
      wp[std::size_t(kk) * T2 + u] = lo | hi << 16;
    }
  auto image = [&](int n) {
    thread_local std::vector<float> out_buf, colp_buf;  // one image's output (L2) and its tap pairs
    float* col = ensure_aligned(thread_ws(), std::size_t(T) * PQ);
    float* out = ensure_aligned(out_buf, std::size_t(K) * PQ);
    auto* colp = reinterpret_cast<std::uint32_t*>(ensure_aligned(colp_buf, std::size_t(T2) * ldc));
    im2col_s1_avx512(sh, x + n * xi, col);
    forward_col_image_bf16(col, T, PQ, K, wp.data(), bias, colp, ldc, out);
    maxpool2d_relu_forward_image(out, y + n * yi, arg + n * yi, K, P, Q, k, std::int32_t(std::size_t(n) * K * PQ));
    if (y16) planes_to_nchw16c_bf16(y + n * yi, K, (P / k) * (Q / k), y16 + n * yi);
  };
  if (!parallel_conv(sh)) {
    for (int n = 0; n < sh.n; ++n) image(n);
  } else {
    parallel_tasks(sh.n, image);
  }
}

}  // namespace detail
#endif

// ---- the entry points: the table's row for the shape (algos.cpp), or the one asked for ----
namespace {
ConvCall relu_pool_call(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k) {
  ConvCall c;
  c.sh = sh, c.x = x, c.w = w, c.bias = bias, c.pool_k = k;
  return c;
}
}  // namespace

bool conv2d_relu_pool_fusable(const Conv2dShape& sh, int k) {
  return choose(sh, ConvDir::relu_pool_forward, isa_active(), k) != Algo::auto_;
}

void conv2d_forward_relu_pool(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                              float* y, std::int32_t* arg, Algo algo) {
  check_shape(sh);
  const AlgoRow* row = resolve(algo, sh, ConvDir::relu_pool_forward, k);
  if (!row) throw std::invalid_argument("conv2d_forward_relu_pool: no fused kernel for " + sh.str());
  ConvCall c = relu_pool_call(sh, x, w, bias, k);
  c.out = y, c.out_arg = arg;
  row->run(c);
}

void conv2d_backward_filter_relu_pool(const Conv2dShape& sh, const float* x, int k, const float* dy, const float* y,
                                      const std::int32_t* arg, float* dw, float* db, Algo algo) {
  check_shape(sh);
  const AlgoRow* row = resolve(algo, sh, ConvDir::relu_pool_backward_filter, k);
  if (!row) throw std::invalid_argument("conv2d_backward_filter_relu_pool: no fused kernel for " + sh.str());
  ConvCall c = relu_pool_call(sh, x, nullptr, nullptr, k);
  c.dy = dy, c.y = y, c.arg = arg, c.out = dw, c.db = db;
  row->run(c);
}

bool conv2d_relu_pool_bf16_fusable(const Conv2dShape& sh, int k) {
  return choose(sh, ConvDir::relu_pool_forward_bf16, isa_active(), k) != Algo::auto_;
}

bool conv2d_forward_relu_pool_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                                   float* y, std::int32_t* arg, std::uint16_t* y16, Algo algo) {
  check_shape(sh);
  const AlgoRow* row = resolve(algo, sh, ConvDir::relu_pool_forward_bf16, k);
  if (!row || (y16 && sh.k % 16 != 0)) return false;
  ConvCall c = relu_pool_call(sh, x, w, bias, k);
  c.out = y, c.out_arg = arg, c.y16 = y16;
  return row->run(c);
}

bool conv2d_backward_filter_relu_pool_bf16(const Conv2dShape& sh, const float* x, int k, const float* dy,
                                           const float* y, const std::int32_t* arg, float* dw, float* db, Algo algo) {
  check_shape(sh);
  const AlgoRow* row = resolve(algo, sh, ConvDir::relu_pool_backward_filter_bf16, k);
  if (!row) return false;
  ConvCall c = relu_pool_call(sh, x, nullptr, nullptr, k);
  c.dy = dy, c.y = y, c.arg = arg, c.out = dw, c.db = db;
  return row->run(c);
}

}  // namespace dlb::cpu
