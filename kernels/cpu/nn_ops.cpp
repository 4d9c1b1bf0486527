// Training kernels on the CPU (see nn_ops.h). Plain loops the compiler vectorizes; the memory they
// touch per step is a few MB for the lecture model, against ~60 MFLOP per image in the convolutions.
#include "kernels/cpu/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/transpose_avx512.h"

namespace dlb::cpu {
namespace {
// Large arrays are cut into tasks of at least this many floats touched for the kernel threads:
// below that a region's few microseconds cost more than they save.
constexpr long kMinTaskFloats = 1 << 14;
constexpr int kTasksPerThread = 4;  // a few per thread, so a thread slowed by a busy core gets fewer

// fn(lo, hi) over [0, n), items of `per_item` floats, in tasks on the kernel threads.
template <class F>
void split_items(long n, long per_item, F&& fn) {
  const long by_size = n * per_item / kMinTaskFloats;
  const int tasks = int(std::max(1L, std::min<long>({n, by_size, long(kTasksPerThread) * kernel_threads()})));
  if (tasks == 1) return fn(0L, n);
  parallel_tasks(tasks, [&](int t) {
    long lo, hi;
    split_range(n, tasks, t, lo, hi);
    fn(lo, hi);
  });
}
}  // namespace

// The pointers are captured by value and dy is read unconditionally: captured by reference (and
// with a conditional load) GCC kept a branchy scalar loop reloading the pointers every element,
// 18% of a CPU AMP step; as written it vectorizes.
void relu_forward(const float* x, float* y, std::size_t n) {
  split_items(long(n), 1, [x, y](long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
      const float v = x[i];
      y[i] = v > 0.f ? v : 0.f;
    }
  });
}
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) {
  split_items(long(n), 1, [y, dy, dx](long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
      const float g = dy[i];
      dx[i] = y[i] > 0.f ? g : 0.f;
    }
  });
}
void sigmoid_forward(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
}
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}

void bias_rows_forward(float* y, const float* b, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) y[std::size_t(i) * cols + j] += b[j];
}
void bias_rows_backward(const float* dy, float* db, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) db[j] += dy[std::size_t(i) * cols + j];
}
void bias_nchw_forward(float* y, const float* b, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      float* p = y + (std::size_t(i) * c + j) * hw;
      for (int t = 0; t < hw; ++t) p[t] += b[j];
    }
}
void bias_nchw_backward(const float* dy, float* db, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      const float* p = dy + (std::size_t(i) * c + j) * hw;
      double s = 0;
      for (int t = 0; t < hw; ++t) s += p[t];
      db[j] += static_cast<float>(s);
    }
}

namespace {
// One 2x2 window: the maximum in visiting order (a later element wins when it is strictly greater
// or NaN) and its flat index; o0 / o1 index the window's top-left / bottom-left element.
inline void max2x2(const float* r0, const float* r1, std::int32_t o0, std::int32_t o1, float& bv, std::int32_t& bi) {
  bv = r0[0], bi = o0;
  float v = r0[1];
  bool t = v > bv || v != v;
  bv = t ? v : bv, bi = t ? o0 + 1 : bi;
  v = r1[0];
  t = v > bv || v != v;
  bv = t ? v : bv, bi = t ? o1 : bi;
  v = r1[1];
  t = v > bv || v != v;
  bv = t ? v : bv, bi = t ? o1 + 1 : bi;
}

#if defined(__SSE2__)
// SSE2 select: t ? a : b, bit for bit.
inline __m128 select(__m128 t, __m128 a, __m128 b) { return _mm_or_ps(_mm_and_ps(t, a), _mm_andnot_ps(t, b)); }
inline __m128i select(__m128i t, __m128i a, __m128i b) {
  return _mm_or_si128(_mm_and_si128(t, a), _mm_andnot_si128(t, b));
}
#endif

// 2x2 max pooling of one pair of rows into q outputs (+ ReLU after, when `relu`): four windows at a
// time in SSE registers (the even and odd columns split by shuffles), the same order and tie/NaN
// rule as max2x2.
void maxpool2x2_row(const float* r0, const float* r1, std::int32_t o0, int w, int q, bool relu, float* y,
                    std::int32_t* arg) {
  int j = 0;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  const __m128i step = _mm_set_epi32(6, 4, 2, 0);
  for (; j + 4 <= q; j += 4) {
    const __m128 a0 = _mm_loadu_ps(r0 + 2 * j), a1 = _mm_loadu_ps(r0 + 2 * j + 4);
    const __m128 b0 = _mm_loadu_ps(r1 + 2 * j), b1 = _mm_loadu_ps(r1 + 2 * j + 4);
    const __m128 e0 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0)), d0 = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m128 e1 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)), d1 = _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 bv = e0;
    __m128i sel = _mm_setzero_si128();  // offset of the winner within the window: 0, 1, w, w + 1
    __m128 t = _mm_or_ps(_mm_cmpgt_ps(d0, bv), _mm_cmpunord_ps(d0, d0));
    bv = select(t, d0, bv), sel = select(_mm_castps_si128(t), _mm_set1_epi32(1), sel);
    t = _mm_or_ps(_mm_cmpgt_ps(e1, bv), _mm_cmpunord_ps(e1, e1));
    bv = select(t, e1, bv), sel = select(_mm_castps_si128(t), _mm_set1_epi32(w), sel);
    t = _mm_or_ps(_mm_cmpgt_ps(d1, bv), _mm_cmpunord_ps(d1, d1));
    bv = select(t, d1, bv), sel = select(_mm_castps_si128(t), _mm_set1_epi32(w + 1), sel);
    if (relu) bv = _mm_and_ps(_mm_cmpgt_ps(bv, zero), bv);  // v > 0 ? v : 0 (NaN -> 0)
    _mm_storeu_ps(y + j, bv);
    const __m128i idx = _mm_add_epi32(_mm_add_epi32(_mm_set1_epi32(o0 + 2 * j), step), sel);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(arg + j), idx);
  }
#endif
  for (; j < q; ++j) {
    float bv;
    std::int32_t bi;
    max2x2(r0 + 2 * j, r1 + 2 * j, o0 + 2 * j, o0 + w + 2 * j, bv, bi);
    y[j] = relu ? (bv > 0.f ? bv : 0.f) : bv;
    arg[j] = bi;
  }
}

#if defined(__x86_64__)
// maxpool2x2_row in AVX-512: 16 windows a step (a row of the lecture's conv1 pool, 14, in one masked
// step), the even and odd columns split by two cross-lane permutes; the same order and tie/NaN rule.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void maxpool2x2_row_avx512(const float* r0, const float* r1,
                                                                               std::int32_t o0, int w, int q,
                                                                               bool relu, float* y,
                                                                               std::int32_t* arg) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i two = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512 zero = _mm512_setzero_ps();
  for (int j = 0; j < q; j += 16) {
    const int n = std::min(16, q - j);
    const __mmask16 keep = __mmask16((1u << n) - 1);
    const __mmask16 lo = 2 * n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (2 * n)) - 1);
    const __mmask16 hi = 2 * n > 16 ? __mmask16((1u << (2 * n - 16)) - 1) : __mmask16(0);
    const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * j), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * j + 16);
    const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * j), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * j + 16);
    const __m512 e0 = _mm512_permutex2var_ps(a0, ev, a1), d0 = _mm512_permutex2var_ps(a0, od, a1);
    const __m512 e1 = _mm512_permutex2var_ps(b0, ev, b1), d1 = _mm512_permutex2var_ps(b0, od, b1);
    __m512 bv = e0;
    __m512i sel = _mm512_setzero_si512();  // offset of the winner within the window: 0, 1, w, w + 1
    __mmask16 t = _mm512_cmp_ps_mask(d0, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d0, d0, _CMP_UNORD_Q);
    bv = _mm512_mask_mov_ps(bv, t, d0), sel = _mm512_mask_mov_epi32(sel, t, _mm512_set1_epi32(1));
    t = _mm512_cmp_ps_mask(e1, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(e1, e1, _CMP_UNORD_Q);
    bv = _mm512_mask_mov_ps(bv, t, e1), sel = _mm512_mask_mov_epi32(sel, t, _mm512_set1_epi32(w));
    t = _mm512_cmp_ps_mask(d1, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d1, d1, _CMP_UNORD_Q);
    bv = _mm512_mask_mov_ps(bv, t, d1), sel = _mm512_mask_mov_epi32(sel, t, _mm512_set1_epi32(w + 1));
    if (relu) bv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(bv, zero, _CMP_GT_OQ), bv);  // v > 0 ? v : 0 (NaN -> 0)
    _mm512_mask_storeu_ps(y + j, keep, bv);
    const __m512i idx = _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(o0 + 2 * j), two), sel);
    _mm512_mask_storeu_epi32(arg + j, keep, idx);
  }
}
#endif

// maxpool2d_forward over planes [plane0, plane1), then ReLU when `relu`; arg counted from `origin`.
void maxpool2d_forward_planes(const float* x, float* y, std::int32_t* arg, long plane0, long plane1, int h, int w,
                              int k, bool relu, std::int32_t origin = 0) {
  const int p = h / k, q = w / k;
  const bool simd512 = isa_allows(Isa::avx512);
  (void)simd512;
  for (long plane = plane0; plane < plane1; ++plane) {
    const float* xp = x + plane * h * w;
    float* yp = y + plane * p * q;
    std::int32_t* ap = arg + plane * p * q;
    const std::int32_t base = origin + static_cast<std::int32_t>(plane * h * w);
    if (k == 2) {  // the lecture's pool: branch-free, vectorized
#if defined(__x86_64__)
      if (simd512) {
        for (int i = 0; i < p; ++i)
          maxpool2x2_row_avx512(xp + 2 * i * w, xp + (2 * i + 1) * w, base + 2 * i * w, w, q, relu, yp + i * q,
                                ap + i * q);
        continue;
      }
#endif
      for (int i = 0; i < p; ++i)
        maxpool2x2_row(xp + 2 * i * w, xp + (2 * i + 1) * w, base + 2 * i * w, w, q, relu, yp + i * q, ap + i * q);
      continue;
    }
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < q; ++j) {
        int best = (i * k) * w + j * k;
        float bv = xp[best];
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const int idx = (i * k + a) * w + j * k + b;
            if (xp[idx] > bv || std::isnan(xp[idx])) bv = xp[idx], best = idx;
          }
        yp[i * q + j] = relu ? (bv > 0.f ? bv : 0.f) : bv;
        ap[i * q + j] = base + best;
      }
  }
}

// Backward of relu(maxpool 2x2) for one pair of rows: writes both rows whole (each element once:
// the window's winner gets dy where y > 0, the rest 0), four windows at a time.
void maxpool2x2_relu_backward_row(const float* g, const float* y, const std::int32_t* arg, std::int32_t o0, int w,
                                  int q, float* d0, float* d1) {
  int j = 0;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  const __m128i step = _mm_set_epi32(6, 4, 2, 0), one = _mm_set1_epi32(1), wv = _mm_set1_epi32(w),
                w1 = _mm_set1_epi32(w + 1);
  for (; j + 4 <= q; j += 4) {
    const __m128 gv = _mm_and_ps(_mm_cmpgt_ps(_mm_loadu_ps(y + j), zero), _mm_loadu_ps(g + j));
    const __m128i rel = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(arg + j)),
                                      _mm_add_epi32(_mm_set1_epi32(o0 + 2 * j), step));
    const __m128 e0 = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(rel, _mm_setzero_si128())), gv);
    const __m128 od0 = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(rel, one)), gv);
    const __m128 e1 = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(rel, wv)), gv);
    const __m128 od1 = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(rel, w1)), gv);
    _mm_storeu_ps(d0 + 2 * j, _mm_unpacklo_ps(e0, od0));
    _mm_storeu_ps(d0 + 2 * j + 4, _mm_unpackhi_ps(e0, od0));
    _mm_storeu_ps(d1 + 2 * j, _mm_unpacklo_ps(e1, od1));
    _mm_storeu_ps(d1 + 2 * j + 4, _mm_unpackhi_ps(e1, od1));
  }
#endif
  for (; j < q; ++j) {
    const float v = y[j] > 0.f ? g[j] : 0.f;
    const std::int32_t rel = arg[j] - (o0 + 2 * j);
    d0[2 * j] = rel == 0 ? v : 0.f;
    d0[2 * j + 1] = rel == 1 ? v : 0.f;
    d1[2 * j] = rel == w ? v : 0.f;
    d1[2 * j + 1] = rel == w + 1 ? v : 0.f;
  }
  for (int t = 2 * q; t < w; ++t) d0[t] = d1[t] = 0.f;  // ragged right edge
}
}  // namespace

void maxpool2d_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k) {
  split_items(long(n) * c, long(h) * w,
              [&](long lo, long hi) { maxpool2d_forward_planes(x, y, arg, lo, hi, h, w, k, false); });
}
void maxpool2d_relu_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k) {
  split_items(long(n) * c, long(h) * w,
              [&](long lo, long hi) { maxpool2d_forward_planes(x, y, arg, lo, hi, h, w, k, true); });
}
namespace {
// One 16-channel block of one image: rows i of the output, as the scalar rule of max2x2 per lane.
void pool16_block_scalar(const std::uint16_t* xb, std::int32_t base, int c0, int h, int w, int p, int q, std::size_t pq,
                         float* y, std::int32_t* arg) {
  for (int l = 0; l < 16; ++l)
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < q; ++j) {
        const int off[4] = {(2 * i) * w + 2 * j, (2 * i) * w + 2 * j + 1, (2 * i + 1) * w + 2 * j, (2 * i + 1) * w + 2 * j + 1};
        float bv = bf16_to_fp32_ref(xb[std::size_t(off[0]) * 16 + l]);
        int bo = off[0];
        for (int t = 1; t < 4; ++t) {
          const float v = bf16_to_fp32_ref(xb[std::size_t(off[t]) * 16 + l]);
          if (v > bv || v != v) bv = v, bo = off[t];
        }
        const std::size_t o = std::size_t(c0 + l) * pq + std::size_t(i) * q + j;
        y[o] = bv > 0.f ? bv : 0.f;
        arg[o] = base + (c0 + l) * h * w + bo;
      }
}

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (_mm512_undefined_* inside)
#endif
#define DLB_POOL16 __attribute__((target("avx512f,avx512bw,avx512vl")))
DLB_POOL16 inline __m512 load_bf16x16(const std::uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
// The 16 channels in the lanes: 4 loads per window, the choice in mask registers. 16 windows (pooled
// pixels o0 .. o0+15 of the plane, across rows) are then transposed to 16 planes' runs of 16: one
// vector store per plane (the ragged last group under a mask).
DLB_POOL16 void pool16_block_avx512(const std::uint16_t* xb, std::int32_t base, int c0, int h, int w, int p, int q,
                                    std::size_t pq, float* y, std::int32_t* arg) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i chan = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(h * w));
  const __m512i origin = _mm512_add_epi32(chan, _mm512_set1_epi32(base + c0 * h * w));
  (void)p;
  for (std::size_t o0 = 0; o0 < pq; o0 += 16) {
    const int nw = int(std::min<std::size_t>(16, pq - o0));
    __m512 vals[16], idx[16];
    for (int t = 0; t < 16; ++t) {
      if (t >= nw) {
        vals[t] = zero, idx[t] = zero;
        continue;
      }
      const int i = int((o0 + t) / q), j = int((o0 + t) % q);
      const int o00 = (2 * i) * w + 2 * j;
      const std::uint16_t* r0 = xb + std::size_t(o00) * 16;
      const std::uint16_t* r1 = r0 + std::size_t(w) * 16;
      const __m512 a = load_bf16x16(r0), b = load_bf16x16(r0 + 16), cc = load_bf16x16(r1), d = load_bf16x16(r1 + 16);
      __m512 bv = a;
      __m512i bo = _mm512_set1_epi32(o00);
      __mmask16 m = _mm512_cmp_ps_mask(b, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
      bv = _mm512_mask_mov_ps(bv, m, b), bo = _mm512_mask_mov_epi32(bo, m, _mm512_set1_epi32(o00 + 1));
      m = _mm512_cmp_ps_mask(cc, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(cc, cc, _CMP_UNORD_Q);
      bv = _mm512_mask_mov_ps(bv, m, cc), bo = _mm512_mask_mov_epi32(bo, m, _mm512_set1_epi32(o00 + w));
      m = _mm512_cmp_ps_mask(d, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
      bv = _mm512_mask_mov_ps(bv, m, d), bo = _mm512_mask_mov_epi32(bo, m, _mm512_set1_epi32(o00 + w + 1));
      vals[t] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(bv, zero, _CMP_GT_OQ), bv);  // relu: v > 0 ? v : 0 (NaN -> 0)
      idx[t] = _mm512_castsi512_ps(_mm512_add_epi32(bo, origin));
    }
    transpose16x16(vals);
    transpose16x16(idx);
    const __mmask16 keep = __mmask16((1u << nw) - 1);
    for (int l = 0; l < 16; ++l) {
      const std::size_t at = std::size_t(c0 + l) * pq + o0;
      _mm512_mask_storeu_ps(y + at, keep, vals[l]);
      _mm512_mask_storeu_ps(reinterpret_cast<float*>(arg + at), keep, idx[l]);
    }
  }
}

// Its backward: dy, y and arg of 16 windows read as they lie in the 16 planes (16 loads each, the
// ragged last group under a mask) and transposed to the channels in the lanes; dy rounded to bf16
// (as fp32_to_bf16_ref: ties to even, NaN kept quiet) goes to the one window position arg names,
// under the ReLU's mask, and zeros to the other three: 4 stores of 16 bf16 per window write each dx
// element once, with no branch (the scalar loop's y > 0 test is a coin toss for the predictor) and
// no memset when h and w are even.
DLB_POOL16 void unpool16_block_avx512(const float* dy, const float* y, const std::int32_t* arg, std::int32_t base,
                                      int h, int w, int q, std::size_t pq, std::uint16_t* db) {
  const __m512i l16 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i plane_base =  // arg of each lane's plane origin
      _mm512_add_epi32(_mm512_set1_epi32(base), _mm512_mullo_epi32(l16, _mm512_set1_epi32(h * w)));
  const __m512 zero = _mm512_setzero_ps();
  if ((h | w) & 1) std::memset(db, 0, std::size_t(h) * w * 16 * sizeof(std::uint16_t));  // ragged edge
  for (std::size_t o0 = 0; o0 < pq; o0 += 16) {
    const int nw = int(std::min<std::size_t>(16, pq - o0));
    const __mmask16 keep = __mmask16((1u << nw) - 1);
    __m512 G[16], Y[16], A[16];
    for (int l = 0; l < 16; ++l) {
      const std::size_t at = std::size_t(l) * pq + o0;
      G[l] = _mm512_maskz_loadu_ps(keep, dy + at), Y[l] = _mm512_maskz_loadu_ps(keep, y + at);
      A[l] = _mm512_maskz_loadu_ps(keep, reinterpret_cast<const float*>(arg + at));
    }
    transpose16x16(G);
    transpose16x16(Y);
    transpose16x16(A);
    for (int t = 0; t < nw; ++t) {
      const int i = int((o0 + t) / q), j = int((o0 + t) % q), o00 = (2 * i) * w + 2 * j;
      const __m512i at = _mm512_sub_epi32(_mm512_castps_si512(A[t]), plane_base);
      const __mmask16 live = _mm512_cmp_ps_mask(Y[t], zero, _CMP_GT_OQ);
      const __m512i u = _mm512_castps_si512(G[t]);
      const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
      r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(G[t], G[t], _CMP_UNORD_Q),
                                _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
      const __m256i v = _mm512_cvtepi32_epi16(r);
      const int offs[4] = {o00, o00 + 1, o00 + w, o00 + w + 1};
      for (int k = 0; k < 4; ++k) {
        const __mmask16 m = live & _mm512_cmpeq_epi32_mask(at, _mm512_set1_epi32(offs[k]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(db + std::size_t(offs[k]) * 16), _mm256_maskz_mov_epi16(m, v));
      }
    }
  }
}
#undef DLB_POOL16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
}  // namespace

// The 16-channel blocks of n images of c channels (h x w floats each), split over the kernel
// threads: fn(b, img, c0) for block b = img * c/16 + c0/16 (nChw16c: block b is b*h*w*16 elements in).
namespace {
template <class F>
void for_each_block16(int n, int c, int h, int w, F&& fn) {
  const int cb = c / 16;
  split_items(long(n) * cb, 16L * h * w, [&](long b0, long b1) {
    for (long b = b0; b < b1; ++b) fn(b, b / cb, int(b % cb) * 16);
  });
}
}  // namespace

void maxpool2x2_relu_forward_nchw16c_bf16(const std::uint16_t* x, float* y, std::int32_t* arg, int n, int c, int h,
                                          int w) {
  const int p = h / 2, q = w / 2;
  const std::size_t pq = std::size_t(p) * q, hw = std::size_t(h) * w;
  const bool simd = isa_allows(Isa::avx512);
  for_each_block16(n, c, h, w, [&](long b, long img, int c0) {
    const std::uint16_t* xb = x + std::size_t(b) * hw * 16;
    const std::int32_t base = static_cast<std::int32_t>(img * c * hw);
    float* yi = y + std::size_t(img) * c * pq;
    std::int32_t* ai = arg + std::size_t(img) * c * pq;
#if defined(__x86_64__)
    if (simd) return pool16_block_avx512(xb, base, c0, h, w, p, q, pq, yi, ai);
#endif
    pool16_block_scalar(xb, base, c0, h, w, p, q, pq, yi, ai);
  });
  (void)simd;
}

void maxpool2x2_relu_backward_nchw16c_bf16(const float* dy, const float* y, const std::int32_t* arg, std::uint16_t* dx,
                                           int n, int c, int h, int w) {
  const int q = w / 2;
  const std::size_t pq = std::size_t(h / 2) * q, hw = std::size_t(h) * w;
  const bool simd = isa_allows(Isa::avx512);
  for_each_block16(n, c, h, w, [&](long b, long img, int c0) {
    std::uint16_t* db = dx + std::size_t(b) * hw * 16;
    const std::size_t plane0 = std::size_t(img) * c + c0;
#if defined(__x86_64__)
    if (simd)
      return unpool16_block_avx512(dy + plane0 * pq, y + plane0 * pq, arg + plane0 * pq, std::int32_t(plane0 * hw), h,
                                   w, q, pq, db);
#endif
    std::memset(db, 0, hw * 16 * sizeof(std::uint16_t));
    for (int l = 0; l < 16; ++l) {
      const std::size_t plane = plane0 + l;
      const float* g = dy + plane * pq;
      const float* yv = y + plane * pq;
      const std::int32_t* a = arg + plane * pq;
      const std::int32_t base = static_cast<std::int32_t>(plane * hw);
      for (std::size_t o = 0; o < pq; ++o)
        if (yv[o] > 0.f) db[std::size_t(a[o] - base) * 16 + l] = fp32_to_bf16_ref(g[o]);
    }
  });
  (void)simd;
}

void maxpool2d_backward(const float* dy, const std::int32_t* arg, float* dx, std::size_t x_size, std::size_t y_size) {
  std::fill(dx, dx + x_size, 0.f);
  for (std::size_t i = 0; i < y_size; ++i) dx[arg[i]] += dy[i];
}
namespace {
// maxpool2d_relu_backward over planes [plane0, plane1), arg counted from `origin`.
void maxpool2d_relu_backward_planes(const float* dy, const float* y, const std::int32_t* arg, float* dx, long plane0,
                                    long plane1, int h, int w, int k, std::int32_t origin) {
  const int p = h / k, q = w / k;
  const std::size_t hw = std::size_t(h) * w, pq = std::size_t(p) * q;
  for (long plane = plane0; plane < plane1; ++plane) {
    float* dp = dx + plane * hw;
    const float* gp = dy + plane * pq;
    const float* yp = y + plane * pq;
    const std::int32_t* ap = arg + plane * pq;
    const std::int32_t base = origin + static_cast<std::int32_t>(plane * hw);
    for (int i = 0; i < p; ++i) {
      if (k == 2) {
        maxpool2x2_relu_backward_row(gp + i * q, yp + i * q, ap + i * q, base + 2 * i * w, w, q,
                                     dp + std::size_t(2 * i) * w, dp + std::size_t(2 * i + 1) * w);
        continue;
      }
      for (int a = 0; a < k; ++a) {  // zero the k rows of this window row (and the ragged right edge)
        float* row = dp + std::size_t(i * k + a) * w;
        for (int t = 0; t < w; ++t) row[t] = 0.f;
      }
      for (int j = 0; j < q; ++j)
        if (yp[i * q + j] > 0.f) dp[ap[i * q + j] - base] = gp[i * q + j];
    }
    for (int r = p * k; r < h; ++r)  // ragged bottom rows
      for (int t = 0; t < w; ++t) dp[std::size_t(r) * w + t] = 0.f;
  }
}
}  // namespace

void maxpool2d_relu_backward(const float* dy, const float* y, const std::int32_t* arg, float* dx, int n, int c, int h,
                             int w, int k) {
  split_items(long(n) * c, long(h) * w, [&](long plane0, long plane1) {
    maxpool2d_relu_backward_planes(dy, y, arg, dx, plane0, plane1, h, w, k, 0);
  });
}

void maxpool2d_relu_forward_image(const float* x, float* y, std::int32_t* arg, int c, int h, int w, int k,
                                  std::int32_t origin) {
  maxpool2d_forward_planes(x, y, arg, 0, c, h, w, k, true, origin);
}
void maxpool2d_relu_backward_image(const float* dy, const float* y, const std::int32_t* arg, float* dx, int c, int h,
                                   int w, int k, std::int32_t origin) {
  maxpool2d_relu_backward_planes(dy, y, arg, dx, 0, c, h, w, k, origin);
}

float softmax_xent_forward_backward(const float* logits, const std::int32_t* labels, int n, int classes,
                                    float* dlogits) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + std::size_t(i) * classes;
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < classes; ++j) mx = std::max(mx, z[j]);
    double s = 0;
    for (int j = 0; j < classes; ++j) s += std::exp(double(z[j]) - mx);
    const double lse = mx + std::log(s);
    total += lse - z[labels[i]];
    if (dlogits) {
      float* d = dlogits + std::size_t(i) * classes;
      for (int j = 0; j < classes; ++j)
        d[j] = static_cast<float>((std::exp(double(z[j]) - lse) - (j == labels[i] ? 1.0 : 0.0)) / n);
    }
  }
  return static_cast<float>(total / n);
}

float mse_forward_backward(const float* pred, const float* target, std::size_t count, float* dpred) {
  double s = 0;
  const float scale = 2.f / static_cast<float>(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float d = pred[i] - target[i];
    s += double(d) * d;
    if (dpred) dpred[i] = scale * d;
  }
  return static_cast<float>(s / count);
}

namespace {
#if defined(__x86_64__)
__attribute__((target("avx512f"))) void zero_streaming512(float* p, std::size_t n) {
  std::size_t i = 0;
  for (; i < n && (reinterpret_cast<std::uintptr_t>(p + i) & 63); ++i) p[i] = 0.f;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(p + i, _mm512_setzero_ps());
  for (; i < n; ++i) p[i] = 0.f;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, inside its own _round_ intrinsics
#endif
__attribute__((target("avx512f"))) void weighted_sum512(float* out, const float* const* parts, const float* w,
                                                          int nparts, std::size_t n) {
  // The _round_ forms: GCC may contract _mm512_mul_ps + _mm512_add_ps into an FMA (other bits than
  // the scalar loop's); these builtins it leaves alone.
  constexpr int kRound = _MM_FROUND_CUR_DIRECTION;
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    __m512 acc = _mm512_mul_round_ps(_mm512_maskz_loadu_ps(m, parts[0] + i), _mm512_set1_ps(w[0]), kRound);
    for (int k = 1; k < nparts; ++k)
      acc = _mm512_add_round_ps(
          acc, _mm512_mul_round_ps(_mm512_maskz_loadu_ps(m, parts[k] + i), _mm512_set1_ps(w[k]), kRound), kRound);
    _mm512_mask_storeu_ps(out + i, m, acc);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
}  // namespace

void zero_streaming(float* p, std::size_t n) {
#if defined(__x86_64__)
  if (isa_allows(Isa::avx512)) {
    zero_streaming512(p, n);
  } else {
    std::size_t i = 0;
    for (; i < n && (reinterpret_cast<std::uintptr_t>(p + i) & 15); ++i) p[i] = 0.f;
    for (; i + 4 <= n; i += 4) _mm_stream_ps(p + i, _mm_setzero_ps());
    for (; i < n; ++i) p[i] = 0.f;
  }
  _mm_sfence();
#else
  std::fill(p, p + n, 0.f);
#endif
}

void weighted_sum(float* out, const float* const* parts, const float* w, int nparts, std::size_t n) {
  if (nparts <= 0) return std::fill(out, out + n, 0.f);
#if defined(__x86_64__)
  if (isa_allows(Isa::avx512)) return weighted_sum512(out, parts, w, nparts, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    float acc = parts[0][i] * w[0];
    for (int k = 1; k < nparts; ++k) acc += parts[k][i] * w[k];
    out[i] = acc;
  }
}

void sgd_momentum_step(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, bool first) {
  if (momentum == 0.f) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
    return;
  }
  // Captured by value, the first-step test hoisted: both loops vectorize (see relu_backward).
  split_items(long(n), 3, [p, g, buf, lr, momentum, first](long lo, long hi) {
    if (first) {
      for (long i = lo; i < hi; ++i) {
        const float b = g[i];
        buf[i] = b;
        p[i] -= lr * b;
      }
      return;
    }
    for (long i = lo; i < hi; ++i) {
      const float b = momentum * buf[i] + g[i];
      buf[i] = b;
      p[i] -= lr * b;
    }
  });
}

}  // namespace dlb::cpu
