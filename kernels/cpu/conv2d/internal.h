// Shared by the files of kernels/cpu/conv2d/ only: the ISA target macros, workspace helpers, the
// inline SIMD helpers more than one kernel file uses, and the kernels each file exports to the
// dispatch (algos.cpp) and the launchers (threading.cpp). Not part of the public API (conv2d.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/common/errors.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/transpose_avx512.h"

#if defined(__x86_64__)
#define DLB_DIRECT_KERNELS 1
#define DLB_AVX2_FMA __attribute__((target("avx2,fma")))
// The block kernels are inlined into their driver: compiled on their own, GCC keeps the
// accumulator array on the stack (a store per FMA pair), at half the speed.
#define DLB_AVX2_FMA_INLINE __attribute__((target("avx2,fma"), always_inline)) inline
#define DLB_AVX512_T __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))
#define DLB_AVX512_INLINE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), always_inline)) inline
#define DLB_BF16_T __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,fma")))
#define DLB_BF16_INLINE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,fma"), always_inline)) inline
#endif

namespace dlb::cpu::detail {

inline void check_shape(const Conv2dShape& sh) {
  if (!sh.valid()) throw UsageError("conv2d: invalid shape " + sh.str());
}

// dy of image n of a call (the col backward-filter kernels read dy one image at a time: from the
// batch's dy, or made image by image from a pooled gradient, conv2d_backward_filter_relu_pool).
using DyImage = std::function<const float*(int)>;

// ---- im2col.cpp ----
constexpr std::size_t kTargetColFloats = std::size_t(256) << 10;  // 1 MiB (chunk_images)
int chunk_images(const Conv2dShape& sh, std::size_t target = kTargetColFloats);
void ensure(std::vector<float>& ws, std::size_t n);
float* ensure_aligned(std::vector<float>& ws, std::size_t n);
float sum(const float* g, std::size_t n);
bool is_pointwise(const Conv2dShape& sh);
void im2col(const Conv2dShape& sh, const float* x, int nb, float* col);
void col2im(const Conv2dShape& sh, const float* col, int nb, float* dx);
// The im2col path's sizes and one thread's workspace: images in chunks of nb, the im2col buffer
// `col` (none for a pointwise conv) and a [K x nb*PQ] staging buffer `buf` (when nb > 1), in ws.
struct Im2colPlan {
  int K, CRS;
  std::size_t PQ;
  bool pw;
  int nb;
  float* col;
  float* buf;
};
Im2colPlan im2col_plan(const Conv2dShape& sh, std::vector<float>& ws);
void gather_images(const float* src, int m, int K, std::size_t PQ, float* dst);

// ---- threading.cpp ----
int task_images(const Conv2dShape& sh, const Conv2dShape& run);
bool parallel_conv(const Conv2dShape& sh);
Conv2dShape sub_batch(const Conv2dShape& sh, long first, long last);
std::vector<float>& thread_ws();

// The batch of a backward-filter cut into tasks: serial(sub-batch shape, its first image, partial dW,
// partial db, workspace) overwrites the partial sums of its images. Each task reduces over its own
// images into its own partial dW (task 0: dw itself); the partials are added in task order
// afterwards, so the bits do not depend on which thread ran what. A few tasks per thread: enough to
// balance on a shared machine, few partial sums to add.
template <class Serial>
void backward_filter_tasks(const Conv2dShape& sh, float* dw, float* db, std::vector<float>& ws, Serial&& serial) {
  if (!parallel_conv(sh)) return serial(sh, 0L, dw, db, ws);
  const int tasks = std::min(sh.n, std::max(kernel_threads(), std::min(4 * kernel_threads(), sh.n / chunk_images(sh))));
  const std::size_t wsz = sh.w_size(), bsz = db ? std::size_t(sh.k) : 0;
  thread_local std::vector<float> partial;  // [tasks - 1][wsz + bsz], the calling thread's
  ensure(partial, (tasks - 1) * (wsz + bsz));
  float* const base = partial.data();  // tasks run on other threads too: no thread_local inside
  parallel_tasks(tasks, [&](int t) {
    long i0, i1;
    split_range(sh.n, tasks, t, i0, i1);
    float* pdw = t == 0 ? dw : base + (t - 1) * (wsz + bsz);
    float* pdb = !db ? nullptr : t == 0 ? db : pdw + wsz;
    serial(sub_batch(sh, i0, i1), i0, pdw, pdb, thread_ws());
  });
  for (int t = 1; t < tasks; ++t) {
    const float* p = base + (t - 1) * (wsz + bsz);
    for (std::size_t i = 0; i < wsz; ++i) dw[i] += p[i];
    for (std::size_t i = 0; i < bsz; ++i) db[i] += p[wsz + i];
  }
}

// ---- algos.cpp: the dispatch table ----
// The operands of one call (each direction uses its own; the rest stay null).
struct ConvCall {
  Conv2dShape sh;                    // the (sub-)batch this call runs
  const float* x = nullptr;          // input
  const float* w = nullptr;          // filters, KCRS
  const float* wt = nullptr;         // the filters in the row's layout (dense directions; null for KCRS)
  const float* bias = nullptr;
  const float* dy = nullptr;         // the output's gradient (the fused ones: pooled)
  const float* y = nullptr;          // fused backward: the pooled output and its argmax
  const std::int32_t* arg = nullptr;
  int pool_k = 0;
  float* out = nullptr;              // y, dx or dw
  float* db = nullptr;
  float* dx = nullptr;               // sparse dy: dx (may be null)
  std::int32_t* out_arg = nullptr;   // fused forward: argmax
  std::uint16_t* y16 = nullptr;      // fused bf16 forward: nChw16c copy (may be null)
  std::vector<float>* ws = nullptr;  // the thread's workspace (dense directions)
};
// The filter layout a dense row reads (threading.cpp lays it out once per thread and call).
enum class Filters { kcrs, crsk, rot_kcrs, rot_crsk, rot_cols16, rot_cols8 };
struct AlgoRow {
  Algo algo;
  const char* name;
  ConvDir dir;
  bool (*applies)(const Conv2dShape& sh, Isa isa, int pool_k);
  bool (*run)(const ConvCall& c);  // false: declined (the sparse kernels: dy too dense)
  Filters filters;
};
const AlgoRow* algo_row(Algo a);  // null where not built (no x86-64 kernels)
// The row to run: `requested`, or the first that applies at isa_active() for Algo::auto_ (null if
// none does). Throws std::invalid_argument when a requested row is of another direction or does not
// take the shape.
const AlgoRow* resolve(Algo requested, const Conv2dShape& sh, ConvDir dir, int pool_k);

// ---- im2col.cpp: im2col + OpenBLAS sgemm (any shape) ----
void forward_im2col_gemm(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                         std::vector<float>& ws);
void backward_data_im2col_gemm(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                               std::vector<float>& ws);
void backward_filter_im2col_gemm(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                 std::vector<float>& ws);

// ---- bwd_data_cols.cpp ----
Conv2dShape rotated_shape(const Conv2dShape& sh);
void rotate_filters(const Conv2dShape& sh, const float* w, float* wt);
void rotate_filters_crsk(const Conv2dShape& sh, const float* w, float* wt);

#ifdef DLB_DIRECT_KERNELS
// The cols kernels' blocked filters and the kernel: AVX-512 (w512: Filters::rot_cols16) or AVX2 (rot_cols8).
void rotate_filters_cols(const Conv2dShape& sh, const float* w, float* wt, bool w512);
void backward_data_cols(const Conv2dShape& sh, const float* dy, const float* wt, float* dx, std::vector<float>& ws,
                        bool w512);

// ---- relu_pool.cpp ----
using SparseFilterFn = void (*)(const Conv2dShape&, const float*, int, const float*, const float*,
                                const std::int32_t*, long, float*, float*);
SparseFilterFn pool_winners512(const Conv2dShape& sh);
SparseFilterFn pool_winners_avx2(const Conv2dShape& sh);
SparseFilterFn pool_winners_bf16(const Conv2dShape& sh);
void relu_pool_forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k, float* y,
                           std::int32_t* arg, bool w512);
void relu_pool_backward_filter(const Conv2dShape& sh, const float* x, int k, const float* dy, const float* y,
                               const std::int32_t* arg, float* dw, float* db, SparseFilterFn sparse, bool col512);
void relu_pool_forward_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k, float* y,
                            std::int32_t* arg, std::uint16_t* y16);

// ---- sparse_dy.cpp ----
bool sparse_dy_run(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw, float* db,
                   float* dx, bool bf16);

// ---- direct.cpp ----
void filters_to_crsk(const Conv2dShape& sh, const float* w, float* wt);
void forward_direct(const Conv2dShape& sh, const float* x, const float* wt, const float* bias, float* y, float* xpad,
                    bool w512);
void backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db, float* dyt,
                            bool w512);

// ---- col_gemm.cpp ----
DLB_AVX512_T void im2col_s1_avx512(const Conv2dShape& sh, const float* x, float* col);
void forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y, float* col,
                 bool w512);
void backward_filter_col(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw, float* db,
                         std::vector<float>& ws, bool w512);

// The pixel blocks of the col GEMMs' outputs: PQ pixels in vectors of 16, cut into near-equal blocks of
// at most 6 vectors; f(p0, nv, last) per block (its first pixel, its vectors, the last one's lane mask).
template <class F>
inline void for_pixel_blocks(std::size_t PQ, F&& f) {
  const int nvec = int((PQ + 15) / 16), blocks = (nvec + 5) / 6, per = (nvec + blocks - 1) / blocks;
  for (int v0 = 0; v0 < nvec; v0 += per) {
    const int nv = std::min(per, nvec - v0);
    const std::size_t p0 = std::size_t(v0) * 16, rest = PQ - (p0 + std::size_t(nv - 1) * 16);
    f(p0, nv, rest >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rest) - 1));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's intrinsics (_mm512_undefined_ps inside)
#endif
// ---- bf16 helpers (relu_pool.cpp, sparse_dy.cpp) ----
// v rounded to bf16 (nearest even), as fp32.
DLB_BF16_INLINE __m512 rounded_bf16(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v))), 16));
}
DLB_BF16_INLINE __m512bh broadcast_pair(std::uint32_t gp) {
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(std::int32_t(gp)));
}
// One 64-byte entry of two 16-float vectors in bf16 (nearest even), laid out for vpunpcklwd /
// vpunpckhwd: 128-bit lane l holds lo[4l .. 4l + 3] in its low 64 bits and hi[4l .. 4l + 3] (zeros
// for a null hi) in its high ones.
DLB_BF16_INLINE void store_spread_bf16(const float* lo, const float* hi, std::uint16_t* out) {
  const __m512i ix = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i a = _mm512_zextsi256_si512(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(lo))));
  const __m512i b = hi ? _mm512_zextsi256_si512(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(hi))))
                       : _mm512_setzero_si512();
  _mm512_storeu_si512(out, _mm512_permutex2var_epi64(a, ix, b));
}
// d[0 .. N) += two terms' spread entries (p, q; a null q: zeros) times their gradient pair gb: entry
// u (`stride` bf16 after entry u - 1) unpacks into the pair vectors of d[2u] and d[2u + 1].
template <int N>
DLB_BF16_INLINE void spread_pair_bf16(const std::uint16_t* p, const std::uint16_t* q, std::size_t stride, __m512bh gb,
                                      __m512* d) {
#pragma GCC unroll 16
  for (int u = 0; 2 * u < N; ++u) {
    const __m512i a = _mm512_loadu_si512(p + u * stride);
    const __m512i b = q ? _mm512_loadu_si512(q + u * stride) : _mm512_setzero_si512();
    d[2 * u] = _mm512_dpbf16_ps(d[2 * u], reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a, b)), gb);
    if (2 * u + 1 < N)
      d[2 * u + 1] = _mm512_dpbf16_ps(d[2 * u + 1], reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a, b)), gb);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
DLB_BF16_T __attribute__((noinline)) void round_bf16_in_place(float* v, std::size_t n);
// A 64-byte aligned run of n bf16 in ws.
std::uint16_t* ensure_aligned_bf16(std::vector<float>& ws, std::size_t n);
#endif  // DLB_DIRECT_KERNELS

}  // namespace dlb::cpu::detail
