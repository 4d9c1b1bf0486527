// Conv2d on the CPU (declared in conv2d.h): the direct reference in fp64, then the fast paths for
// forward, backward-data and backward-filter: im2col + OpenBLAS sgemm, direct AVX2/AVX-512 kernels
// for convolutions with few output channels, and our own GEMMs on im2col for wide K over a shallow
// C*R*S (forward and backward-filter, AVX2 and AVX-512); last, the launchers that cut the batch into
// tasks for the kernel threads (kernels/cpu/threads.h), and the same GEMMs fused with the ReLU and
// max pool that follow a first convolution (conv2d_forward_relu_pool: per image, in cache).
//
// Napkin math (lecture conv1 at batch 64: n64 c3 32x32 k128 5x5 -> 28x28):
//   flops = 2*n*k*p*q*c*r*s = 2*64*128*784*75 = 0.96 GFLOP per direction;
//   a whole-batch im2col buffer would be c*r*s x n*p*q floats = 75 x 50176 = 15 MB, so the im2col
//   paths work in cache-sized chunks (~1 MB of im2col, see chunk_images).
// The GEMM is the whole cost when c*r*s is large; for conv1 (c*r*s = 75) the im2col copy is a
// visible part, so it is written as contiguous row copies. For conv2 (128 -> 16 channels) im2col
// blows the input up 25x for a GEMM only 16 rows deep: forward and backward-filter run the direct
// kernels there, and backward-data runs as a forward conv with rotated filters
// (backward_data_as_forward), over dy's columns, so that the zero border of its "full" padding is
// never multiplied (conv2d_backward_data_cols_avx512 and _avx2), else through the direct kernel.
//
// im2col layout: the batch is processed in chunks of `nb` images, and one GEMM covers the whole
// chunk (GEMM N = nb*p*q) when one image's p*q is too narrow for a GEMM:
//   col   [c*r*s][nb*p*q]   column index = image*p*q + output pixel
//   ybuf  [k][nb*p*q]       the GEMM output, scattered to NCHW afterwards (+ bias)
// When nb == 1 the GEMM writes straight into y (onto the bias) / reads straight from dy.
#include "kernels/cpu/conv2d.h"

#include <cblas.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <sstream>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/transpose_avx512.h"
#include "kernels/cpu/threads.h"

namespace dlb {

bool Conv2dShape::valid() const {
  if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1 || r < 1 || s < 1) return false;
  if (pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1) return false;
  if (h + 2 * pad_h < r || w + 2 * pad_w < s) return false;  // output would be < 1x1
  return p() >= 1 && q() >= 1;
}

std::string Conv2dShape::str() const {
  std::ostringstream o;
  o << "n" << n << "_c" << c << "_h" << h << "_w" << w << "_k" << k << "_r" << r << "_s" << s << "_p" << pad_h;
  if (pad_w != pad_h) o << "x" << pad_w;
  o << "_u" << stride_h;
  if (stride_w != stride_h) o << "x" << stride_w;
  return o.str();
}

namespace cpu {
namespace {

void check_shape(const Conv2dShape& sh) {
  if (!sh.valid()) throw UsageError("conv2d: invalid shape " + sh.str());
}

// ---------------------------------------------------------------------------------------------
// Reference: direct loops, fp64 accumulation.
// ---------------------------------------------------------------------------------------------
}  // namespace

// Single elements, in gather form: output index `idx` (NCHW / NCHW / KCRS order) in fp64. The
// backward ones gather what the scatter-form references below add up, so a sampled check computes its
// reference a second, independent way.
double conv2d_forward_direct_at(const Conv2dShape& sh, const float* x, const float* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int q = int(idx % Q), p = int(idx / Q % P), k = int(idx / (std::size_t(P) * Q) % sh.k);
  const int n = int(idx / (std::size_t(P) * Q * sh.k));
  double acc = 0;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int s = 0; s < sh.s; ++s) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
      }
    }
  return acc;
}

double conv2d_backward_data_direct_at(const Conv2dShape& sh, const float* dy, const float* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int iw = int(idx % sh.w), ih = int(idx / sh.w % sh.h), c = int(idx / (std::size_t(sh.h) * sh.w) % sh.c);
  const int n = int(idx / (std::size_t(sh.h) * sh.w * sh.c));
  double acc = 0;
  for (int r = 0; r < sh.r; ++r) {
    const int t = ih + sh.pad_h - r;  // = p * stride
    if (t < 0 || t % sh.stride_h) continue;
    const int p = t / sh.stride_h;
    if (p >= P) continue;
    for (int s = 0; s < sh.s; ++s) {
      const int u = iw + sh.pad_w - s;
      if (u < 0 || u % sh.stride_w) continue;
      const int q = u / sh.stride_w;
      if (q >= Q) continue;
      for (int k = 0; k < sh.k; ++k)
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
    }
  }
  return acc;
}

double conv2d_backward_filter_direct_at(const Conv2dShape& sh, const float* x, const float* dy, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int s = int(idx % sh.s), r = int(idx / sh.s % sh.r), c = int(idx / (std::size_t(sh.r) * sh.s) % sh.c);
  const int k = int(idx / (std::size_t(sh.r) * sh.s * sh.c));
  double acc = 0;
  for (int n = 0; n < sh.n; ++n)
    for (int p = 0; p < P; ++p) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int q = 0; q < Q; ++q) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
      }
    }
  return acc;
}

void conv2d_forward_direct(const Conv2dShape& sh, const float* x, const float* w, const float* bias, double* y) {
  check_shape(sh);
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  for (std::size_t i = 0; i < sh.y_size(); ++i)
    y[i] = conv2d_forward_direct_at(sh, x, w, i) + (bias ? bias[i / PQ % sh.k] : 0.0);
}

void conv2d_backward_data_direct(const Conv2dShape& sh, const float* dy, const float* w, double* dx) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  std::fill(dx, dx + sh.x_size(), 0.0);
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dx[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw] +=
                    g * double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
              }
            }
        }
}

void conv2d_backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, double* dw, double* db) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  std::fill(dw, dw + sh.w_size(), 0.0);
  if (db) std::fill(db, db + sh.k, 0.0);
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          if (db) db[k] += g;
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dw[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s] +=
                    g * double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
              }
            }
        }
}

// ---------------------------------------------------------------------------------------------
// Fast paths: im2col + sgemm over a chunk of images.
// ---------------------------------------------------------------------------------------------
namespace {

// Images per GEMM. Forward and backward-data: the im2col chunk should stay cache-sized (about
// 1 MB: written by im2col / the GEMM and consumed while still in L2/L3; a whole-batch 15 MB buffer
// for conv1 at batch 64 ran at half the speed of 4-image chunks), but the GEMM needs enough columns
// (>= 512) to run near peak (conv2 has only 100 output pixels per image). Backward-filter reduces
// over the batch inside the GEMM (its K dimension), so one big GEMM beats many small ones that each
// synchronise OpenBLAS's threads and re-write dW. kMaxColFloats bounds the workspace in every case.
constexpr std::size_t kTargetColFloats = std::size_t(256) << 10;  // 1 MiB
constexpr std::size_t kMinGemmCols = 512;
constexpr std::size_t kMaxColFloats = std::size_t(16) << 20;  // 64 MiB hard cap (>= 1 image always)

// dy of image n of a call (the col backward-filter kernels read dy one image at a time: from the
// batch's dy, or made image by image from a pooled gradient, conv2d_backward_filter_relu_pool).
using DyImage = std::function<const float*(int)>;

int chunk_images(const Conv2dShape& sh, std::size_t target = kTargetColFloats) {
  const std::size_t pq = std::size_t(sh.p()) * sh.q();
  const std::size_t per_image = std::size_t(sh.c) * sh.r * sh.s * pq;
  std::size_t nb;
  if (pq >= kMinGemmCols) {
    nb = 1;  // one image is a wide enough GEMM, and its output needs no relayout
  } else {
    nb = std::max<std::size_t>(1, target / per_image);
    nb = std::max(nb, (kMinGemmCols + pq - 1) / pq);
  }
  nb = std::min(nb, std::max<std::size_t>(1, kMaxColFloats / per_image));
  return int(std::min<std::size_t>(nb, std::size_t(sh.n)));
}

void ensure(std::vector<float>& ws, std::size_t n) {
  if (ws.size() >= n) return;
  try {
    ws.resize(n);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("conv2d workspace of " + std::to_string(n * sizeof(float)) + " bytes");
  }
}

// ws holding n floats from a 64-byte boundary, and that boundary. The kernels' vector loads of
// workspace rows (filters, im2col rows, row buffers) then never straddle two cache lines, whatever
// address malloc returned (large blocks come back 16 bytes past a page boundary).
float* ensure_aligned(std::vector<float>& ws, std::size_t n) {
  ensure(ws, n + 16);
  const auto p = reinterpret_cast<std::uintptr_t>(ws.data());
  return ws.data() + ((64 - p % 64) % 64) / sizeof(float);
}

// Sum of n floats in 8 interleaved partial sums: the compiler keeps them in one vector register
// (a single running sum is a chain of dependent adds, ~4 cycles per element).
float sum(const float* g, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += g[j + l];
  for (; j < n; ++j) acc[j % 8] += g[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// 1x1 filter, stride 1, no padding: the image itself is the im2col matrix.
bool is_pointwise(const Conv2dShape& sh) {
  return sh.r == 1 && sh.s == 1 && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0;
}

// Valid output range [lo, hi) along one axis for filter tap `t`: out index o reads in = o*u - pad + t.
inline void valid_range(int t, int pad, int u, int in, int out, int& lo, int& hi) {
  // in >= 0  <=>  o >= (pad - t) / u (rounded up);  in < in_size  <=>  o <= (in - 1 + pad - t) / u
  const int a = pad - t;
  lo = a <= 0 ? 0 : (a + u - 1) / u;
  const int b = in - 1 + pad - t;
  hi = b < 0 ? 0 : std::min(out, b / u + 1);
  if (lo > hi) lo = hi;
}

// col[(c*R + r)*S + s][img*PQ + p*Q + q] = x[img][c][p*u - pad + r][q*u - pad + s] (0 outside).
// Rows are written contiguously. The rows are short (10-28 floats for the lecture net: ~70k copies
// per image over fwd + bwd), so the copy is an inline loop, not a memcpy call; the attribute keeps
// GCC from turning the loop back into one.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
void im2col(const Conv2dShape& sh, const float* x, int nb, float* col) {
  const int P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const std::size_t PQ = std::size_t(P) * Q, ld = PQ * nb;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r) {
      int p0, p1;
      valid_range(r, sh.pad_h, sh.stride_h, H, P, p0, p1);
      for (int s = 0; s < sh.s; ++s) {
        int q0, q1;
        valid_range(s, sh.pad_w, sh.stride_w, W, Q, q0, q1);
        float* row = col + (std::size_t(c * sh.r + r) * sh.s + s) * ld;
        for (int i = 0; i < nb; ++i) {
          const float* xc = x + (std::size_t(i) * sh.c + c) * H * W;
          float* dst = row + i * PQ;
          if (p0 > 0) std::memset(dst, 0, sizeof(float) * std::size_t(p0) * Q);
          for (int p = p0; p < p1; ++p) {
            float* d = dst + std::size_t(p) * Q;
            const float* src = xc + std::size_t(p * sh.stride_h - sh.pad_h + r) * W - sh.pad_w + s;
            for (int q = 0; q < q0; ++q) d[q] = 0.f;
            if (sh.stride_w == 1) {
              for (int q = q0; q < q1; ++q) d[q] = src[q];
            } else {
              const int u = sh.stride_w;
              for (int q = q0; q < q1; ++q) d[q] = src[q * u];
            }
            for (int q = q1; q < Q; ++q) d[q] = 0.f;
          }
          if (p1 < P) std::memset(dst + std::size_t(p1) * Q, 0, sizeof(float) * std::size_t(P - p1) * Q);
        }
      }
    }
}

// The adjoint of im2col: dx[img][c][ih][iw] += col[...] over every (r, s) tap. dx is zeroed first.
void col2im(const Conv2dShape& sh, const float* col, int nb, float* dx) {
  const int P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const std::size_t PQ = std::size_t(P) * Q, ld = PQ * nb;
  std::memset(dx, 0, sizeof(float) * std::size_t(nb) * sh.c * H * W);
  for (int i = 0; i < nb; ++i)
    for (int c = 0; c < sh.c; ++c) {
      float* xc = dx + (std::size_t(i) * sh.c + c) * H * W;  // one plane stays in L1/L2 for all taps
      for (int r = 0; r < sh.r; ++r) {
        int p0, p1;
        valid_range(r, sh.pad_h, sh.stride_h, H, P, p0, p1);
        for (int s = 0; s < sh.s; ++s) {
          int q0, q1;
          valid_range(s, sh.pad_w, sh.stride_w, W, Q, q0, q1);
          const float* src = col + (std::size_t(c * sh.r + r) * sh.s + s) * ld + i * PQ;
          for (int p = p0; p < p1; ++p) {
            float* d = xc + std::size_t(p * sh.stride_h - sh.pad_h + r) * W - sh.pad_w + s;
            const float* g = src + std::size_t(p) * Q;
            if (sh.stride_w == 1) {
              for (int q = q0; q < q1; ++q) d[q] += g[q];
            } else {
              const int u = sh.stride_w;
              for (int q = q0; q < q1; ++q) d[q * u] += g[q];
            }
          }
        }
      }
    }
}

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
#if defined(__x86_64__)
#define DLB_DIRECT_KERNELS 1
#define DLB_AVX2_FMA __attribute__((target("avx2,fma")))
// The block kernels are inlined into their driver: compiled on their own, GCC keeps the
// accumulator array on the stack (a store per FMA pair), at half the speed.
#define DLB_AVX2_FMA_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

bool cpu_has_avx2_fma() { return isa_allows(Isa::avx2); }  // under the DLB_CPU_ISA cap (isa.h)

constexpr int kDirectMaxK = 32;  // above this, a GEMM per image is deep enough

// With AVX-512 (DLB_CPU_ISA permitting) the direct kernels also beat im2col + sgemm above
// kDirectMaxK when K is a multiple of 16: 32 channels x 12 pixels per block (forward), 2 filter rows
// x 5 taps per dy vector (backward-filter). Measured on the lecture's conv1 (K = 128, C = 3): the
// im2col GEMM is only 75 deep there. (Backward-filter there: use_col_backward_filter.)
bool direct_wide_k(const Conv2dShape& sh) { return sh.k % 16 == 0 && isa_allows(Isa::avx512); }
bool use_col_backward_filter(const Conv2dShape& sh);

bool use_direct(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 && sh.k % 8 == 0 &&
         sh.k <= kDirectMaxK && sh.c * sh.r * sh.s >= 64 && !is_pointwise(sh) && cpu_has_avx2_fma();
}

// Backward-filter for wide K and a shallow C*R*S (the lecture's conv1: K = 128, C*R*S = 75), where
// the per-tap kernel above streams a transposed dy once per 16 channels and tap pair, and im2col's
// sgemm is only C*R*S wide: our own GEMM with the pixels in the vector lanes instead
// (conv2d_backward_filter_col_avx512).
bool use_col_backward_filter(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 && sh.k % 4 == 0 &&
         sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) && isa_allows(Isa::avx512);
}
// The same GEMM in AVX2 (conv2d_backward_filter_col_avx2), where the AVX-512 one does not run.
bool use_col_backward_filter_avx2(const Conv2dShape& sh) {
  return !use_col_backward_filter(sh) && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 &&
         sh.k % 2 == 0 && sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) &&
         isa_allows(Isa::avx2);
}

// Forward for wide K over a shallow C*R*S (the lecture's conv1), any stride and padding: im2col
// and our own GEMM with the pixels in the vector lanes (conv2d_forward_col_avx512). Ahead of the direct
// kernel there, whose k-major blocks cost a scalar scatter of every output into NCHW.
bool use_col_forward(const Conv2dShape& sh) {
  return sh.k % 4 == 0 && sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) &&
         isa_allows(Isa::avx2);
}

// The forward kernel also takes padding. any_k: also above kDirectMaxK output channels (the
// backward-data of a conv with few output channels, run as a forward conv with rotated filters and
// "full" padding: ~50 GFLOP/s of useful work against ~38 for im2col there).
bool use_direct_forward(const Conv2dShape& sh, bool any_k = false) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.k % 8 == 0 && (any_k || sh.k <= kDirectMaxK || direct_wide_k(sh)) &&
         sh.c * sh.r * sh.s >= 64 && !is_pointwise(sh) && cpu_has_avx2_fma();
}

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
#define DLB_AVX512_T __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))
#define DLB_AVX512_INLINE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), always_inline)) inline

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

// The forward direct kernel for this shape and the DLB_CPU_ISA level: AVX-512 when K % 16 == 0.
void conv2d_forward_direct_simd(const Conv2dShape& sh, const float* x, const float* wt, const float* bias, float* y,
                                float* xpad) {
  if (sh.k % 16 == 0 && isa_allows(Isa::avx512)) return conv2d_forward_direct_avx512(sh, x, wt, bias, y, xpad);
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
// 16-channel blocks to the AVX-512 kernel above when K % 16 == 0 and DLB_CPU_ISA allows avx512.
// dyt: workspace of n*P*Q*K floats for dy with channels innermost.
DLB_AVX2_FMA void conv2d_backward_filter_direct_avx2(const Conv2dShape& sh, const float* x, const float* dy, float* dw,
                                                     float* db, float* dyt) {
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
  if (K % 16 == 0 && isa_allows(Isa::avx512)) {  // the AVX-512 blocks (DLB_CPU_ISA permitting)
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
// the image's dy (400 KB for conv1: L2) past them. (Two images per im2col, which halves the lane
// reductions, measured slower at batch 64: 1.25 MB of col and dy no longer fit L2.)
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
// pixel lanes summed once per block and image. Measured on a 2-core Zen 3, lecture conv1 at batch
// 2/4/64 (GFLOP/s): 153/152/131, im2col + OpenBLAS sgemm 126-130/126-129/123-125, oneDNN
// 100/102/95. The col vector is held in a register by force: GCC otherwise folded its load into
// both FMAs (14 loads per 12 FMAs: 126/126/125). Pixels in L2-sized chunks (more lane sums) were
// slower: 127/129/119.

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
// floats, 29 KB for conv1, in L1 across the K/4 channel blocks). Measured on a 2-core Zen 3, lecture
// conv1 at batch 2/4/64 (GFLOP/s): 132/144/115, oneDNN 133/130/119 beside it (im2col + OpenBLAS
// sgemm, which it replaces, ran 110/110/112 in another run). Masked stores on every vector (vmaskmov
// is slow on AMD) ran 50, and a col array behind the register asm lived on the stack: 83.
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
#else
bool use_direct(const Conv2dShape&) { return false; }
bool use_col_forward(const Conv2dShape&) { return false; }
bool use_col_backward_filter(const Conv2dShape&) { return false; }
bool use_col_backward_filter_avx2(const Conv2dShape&) { return false; }
#endif

// ---- one thread: the images of `sh` (a part of the batch) in chunks ----

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
Im2colPlan im2col_plan(const Conv2dShape& sh, std::vector<float>& ws) {
  const int K = sh.k, CRS = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  const bool pw = is_pointwise(sh);
  const int nb = pw ? 1 : chunk_images(sh);
  const std::size_t col_sz = pw ? 0 : std::size_t(CRS) * PQ * nb;
  const std::size_t buf_sz = nb > 1 ? std::size_t(K) * PQ * nb : 0;
  float* col = ensure_aligned(ws, col_sz + buf_sz);
  return {K, CRS, PQ, pw, nb, col, col + col_sz};
}

// m images of [K][PQ] -> [K][m*PQ] (the GEMM's layout for a chunk).
void gather_images(const float* src, int m, int K, std::size_t PQ, float* dst) {
  const std::size_t ncols = PQ * m;
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < K; ++k)
      std::memcpy(dst + std::size_t(k) * ncols + i * PQ, src + (std::size_t(i) * K + k) * PQ, sizeof(float) * PQ);
}

#ifdef DLB_DIRECT_KERNELS
// The own-GEMM forward (use_col_forward(sh)) in the widest ISA allowed.
void forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y, float* col) {
  if (isa_allows(Isa::avx512)) return conv2d_forward_col_avx512(sh, x, w, bias, y, col);
  conv2d_forward_col_avx2(sh, x, w, bias, y, col);
}
#endif

// wt: the filters in CRSK order when use_direct(sh) (then the direct kernel runs), else null.
void forward_serial(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                    std::vector<float>& ws, const float* wt = nullptr) {
#ifdef DLB_DIRECT_KERNELS
  if (!wt && use_col_forward(sh)) {  // (a launcher that passes CRSK filters chose the direct kernel)
    float* col = ensure_aligned(ws, std::size_t(sh.c) * sh.r * sh.s * sh.p() * sh.q());
    return forward_col(sh, x, w, bias, y, col);
  }
  if (wt) {
    const bool padded = sh.pad_h > 0 || sh.pad_w > 0;
    float* xpad = ensure_aligned(ws, padded ? std::size_t(sh.c) * (sh.h + 2 * sh.pad_h) * (sh.w + 2 * sh.pad_w) : 0);
    return conv2d_forward_direct_simd(sh, x, wt, bias, y, xpad);
  }
#endif
  const auto [K, CRS, PQ, pw, nb, col, ybuf] = im2col_plan(sh, ws);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* xi = x + std::size_t(i0) * sh.c * sh.h * sh.w;
    float* yi = y + std::size_t(i0) * K * PQ;
    const float* b;
    if (pw) {
      b = xi;
    } else {
      im2col(sh, xi, m, col);
      b = col;
    }
    const std::size_t ncols = PQ * m;
    if (m == 1) {
      // One image: the GEMM writes y itself, onto the bias (beta = 1; OpenBLAS then skips its
      // separate pass that scales C by beta).
      if (bias)
        for (int k = 0; k < K; ++k) std::fill(yi + std::size_t(k) * PQ, yi + std::size_t(k + 1) * PQ, bias[k]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, int(PQ), CRS, 1.0f, w, CRS, b, int(PQ),
                  bias ? 1.0f : 0.0f, yi, int(PQ));
      continue;
    }
    // [K x CRS] * [CRS x m*PQ] -> [K x m*PQ], then scattered to [m][K][PQ] (+ bias).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, int(ncols), CRS, 1.0f, w, CRS, b, int(ncols), 0.0f,
                ybuf, int(ncols));
    for (int i = 0; i < m; ++i)
      for (int k = 0; k < K; ++k) {
        const float* src = ybuf + std::size_t(k) * ncols + i * PQ;
        float* dst = yi + (std::size_t(i) * K + k) * PQ;
        const float bk = bias ? bias[k] : 0.f;
        for (std::size_t j = 0; j < PQ; ++j) dst[j] = src[j] + bk;
      }
  }
}

// Backward-data as a forward convolution (stride 1 only): dx = conv(dy padded by r-1-pad, W
// rotated by 180 degrees with c and k swapped). Its GEMM is C x (K*R*S) x (H*W) per image instead
// of (C*R*S) x K x (P*Q): far better shaped when K is small (conv2: K = 16 makes the plain path a
// 16-deep GEMM that only writes a 3200-row dcol), at the price of multiplying the zero border
// (H*W / P*Q times the flops, <= 2.5x where we take it; not by conv2d_backward_data_cols_avx512).
bool backward_data_as_forward(const Conv2dShape& sh) {
  if (sh.stride_h != 1 || sh.stride_w != 1 || sh.pad_h > sh.r - 1 || sh.pad_w > sh.s - 1) return false;
  const double waste = double(sh.h) * sh.w / (double(sh.p()) * sh.q());
  return sh.k * 4 <= sh.c && waste <= 2.5;
}

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

// 16 x 16 transpose through registers: dst[j*ldd + i] = src[i*lds + j] for rows i < nr, columns
// j < nc (src rows beyond nr read as zeros, columns beyond nc are not read, dst gets nr floats a row).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's intrinsics (_mm512_undefined_ps inside)
#endif
DLB_AVX512_INLINE void transpose16(const float* src, std::size_t lds, int nr, int nc, float* dst, std::size_t ldd) {
  const __mmask16 mc = __mmask16((1u << nc) - 1), mr = __mmask16((1u << nr) - 1);
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = i < nr ? _mm512_maskz_loadu_ps(mc, src + i * lds) : _mm512_setzero_ps();
  transpose16x16(a);
  for (int j = 0; j < nc; ++j) _mm512_mask_storeu_ps(dst + j * ldd, mr, a[j]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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

// Where it applies: stride 1, S of 3 or 5, and (backward_data_as_forward chose the rotated conv)
// C a multiple of 16 where DLB_CPU_ISA allows avx512 (this kernel), else a multiple of 8 where it
// allows avx2 (conv2d_backward_data_cols_avx2, 8-channel blocks, below).
bool use_cols_backward_data_avx512(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && (sh.s == 3 || sh.s == 5) && sh.c % 16 == 0 &&
         isa_allows(Isa::avx512);
}
bool use_cols_backward_data(const Conv2dShape& sh) {
  return use_cols_backward_data_avx512(sh) || (sh.stride_h == 1 && sh.stride_w == 1 && (sh.s == 3 || sh.s == 5) &&
                                               sh.c % 8 == 0 && isa_allows(Isa::avx2));
}

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
// rate. Measured on a 2-core Zen 3 (GFLOP/s at batch 2/4/64, oneDNN 130-132/136-139/141-143 beside
// it): this kernel 129/136/137 (122/133/144 before the filter rotation was vectorised); with the S
// filters held in registers (NV = 1, 8 pixels: the FMAs into one
// pixel one column apart, under the 4-cycle FMA latency) 103/110/118; NV = 1 with 14 pixels
// 120/128/137; with the column tests left as GCC hoists them (18 flags on the stack: a load per
// column on top of the filter loads) 117/125/139; the padded direct kernel (29% of its taps read
// the border) 94/100/105.
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

void rotate_filters_cols(const Conv2dShape& sh, const float* w, float* wt) {
  if (use_cols_backward_data_avx512(sh)) return rotate_filters_cols16(sh, w, wt);
  rotate_filters_cols_avx2(sh, w, wt);
}

void backward_data_cols(const Conv2dShape& sh, const float* dy, const float* wt, float* dx, std::vector<float>& ws) {
  if (use_cols_backward_data_avx512(sh)) {
    float* rowbuf = ensure_aligned(ws, std::size_t(sh.w) * 32);
    if (sh.s == 3) return conv2d_backward_data_cols_avx512<3>(sh, dy, wt, dx, rowbuf);
    return conv2d_backward_data_cols_avx512<5>(sh, dy, wt, dx, rowbuf);
  }
  float* rowbuf = ensure_aligned(ws, std::size_t(sh.w) * 16);
  if (sh.s == 3) return conv2d_backward_data_cols_avx2<3>(sh, dy, wt, dx, rowbuf);
  conv2d_backward_data_cols_avx2<5>(sh, dy, wt, dx, rowbuf);
}
#else
bool use_cols_backward_data(const Conv2dShape&) { return false; }
void rotate_filters_cols(const Conv2dShape&, const float*, float*) {}
void backward_data_cols(const Conv2dShape&, const float*, const float*, float*, std::vector<float>&) {}
#endif

// wrot: the rotated filters when backward_data_as_forward(sh), else null; when `crsk` (the direct
// kernels) blocked for conv2d_backward_data_cols_avx512 where use_cols_backward_data(sh), else in
// CRSK order; else KCRS.
void backward_data_serial(const Conv2dShape& sh, const float* dy, const float* w, float* dx, std::vector<float>& ws,
                          const float* wrot, bool crsk) {
  if (wrot && crsk && use_cols_backward_data(sh)) return backward_data_cols(sh, dy, wrot, dx, ws);
  if (wrot && crsk) return forward_serial(rotated_shape(sh), dy, nullptr, nullptr, dx, ws, wrot);
  if (wrot) return forward_serial(rotated_shape(sh), dy, wrot, nullptr, dx, ws);
  const auto [K, CRS, PQ, pw, nb, col, dybuf] = im2col_plan(sh, ws);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    float* dxi = dx + std::size_t(i0) * sh.c * sh.h * sh.w;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {
      gather_images(dyi, m, K, PQ, dybuf);
      a = dybuf;
    }
    // [CRS x K] = W^T, times [K x m*PQ] -> dcol [CRS x m*PQ]
    float* out = pw ? dxi : col;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, int(ncols), K, 1.0f, w, CRS, a, int(ncols), 0.0f, out,
                int(ncols));
    if (!pw) col2im(sh, col, m, dxi);
  }
}

#ifdef DLB_DIRECT_KERNELS
// The own-GEMM backward-filter (use_col_backward_filter(sh) or its AVX2 twin), dy image by image.
void backward_filter_col(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw, float* db,
                         std::vector<float>& ws) {
  if (use_col_backward_filter(sh)) return conv2d_backward_filter_col_avx512(sh, x, dy_of, dw, db, ws);
  conv2d_backward_filter_col_avx2(sh, x, dy_of, dw, db, ws);
}
#endif

void backward_filter_serial(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                            std::vector<float>& ws) {
#ifdef DLB_DIRECT_KERNELS
  if (use_direct(sh)) {
    return conv2d_backward_filter_direct_avx2(sh, x, dy, dw, db, ensure_aligned(ws, sh.y_size()));
  }
  const std::size_t yi = std::size_t(sh.k) * sh.p() * sh.q();
  const DyImage dy_of = [&](int n) { return dy + n * yi; };
  if (use_col_backward_filter(sh) || use_col_backward_filter_avx2(sh)) return backward_filter_col(sh, x, dy_of, dw, db, ws);
#endif
  const auto [K, CRS, PQ, pw, nb, col, dybuf] = im2col_plan(sh, ws);
  if (db) std::fill(db, db + K, 0.f);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* xi = x + std::size_t(i0) * sh.c * sh.h * sh.w;
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {
      gather_images(dyi, m, K, PQ, dybuf);
      a = dybuf;
    }
    if (db)
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k) db[k] += sum(dyi + (std::size_t(i) * K + k) * PQ, PQ);
    const float* b = xi;
    if (!pw) {
      im2col(sh, xi, m, col);
      b = col;
    }
    // dW [K x CRS] (+)= dY [K x m*PQ] * col^T [m*PQ x CRS]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, CRS, int(ncols), 1.0f, a, int(ncols), b, int(ncols),
                i0 == 0 ? 0.0f : 1.0f, dw, CRS);
  }
}


// ---- launchers: the batch cut into tasks for the kernel threads (kernels/cpu/threads.h) ----

// Below this many flops a conv runs on the calling thread: a region costs a few microseconds.
constexpr double kMinParallelFlops = 2e6;

// Images per task: the cache-sized chunk of `run` (the convolution that actually runs), but no
// more than an equal share of the batch, so every thread gets work at small batches.
int task_images(const Conv2dShape& sh, const Conv2dShape& run) {
  const int share = (sh.n + kernel_threads() - 1) / kernel_threads();
  return std::max(1, std::min(chunk_images(run), share));
}

bool parallel_conv(const Conv2dShape& sh) {
  return kernel_threads() > 1 && sh.n > 1 && sh.flops() >= kMinParallelFlops;
}

// Images [first, first + s.n) of `sh` as a shape.
Conv2dShape sub_batch(const Conv2dShape& sh, long first, long last) {
  Conv2dShape s = sh;
  s.n = int(last - first);
  return s;
}

// Workspace of the calling thread's tasks (each thread has its own).
std::vector<float>& thread_ws() {
  thread_local std::vector<float> ws;
  return ws;
}

}  // namespace

// Filters laid out anew on every call (CRSK for the direct forward, rotated for the backward-data),
// by each thread that runs tasks of the call, into a buffer of its own (site: one per launcher).
// Written once by the caller and read by the other thread, the 205 KB of conv2's filters crossed
// cores on every call: at batch 2 that cost as much as the conv itself in the phases when this
// shared host put the two cores far apart (our two threads then ran at one thread's speed, while
// oneDNN, which lays its filters out per thread, did not slow down).
struct FilterCopy {
  std::vector<float> buf;
  std::uint64_t call = 0;
  float* p = nullptr;
};
std::atomic<std::uint64_t> g_filter_calls{0};
template <class Fill>
const float* filters_for_call(FilterCopy& fc, std::uint64_t call, std::size_t n, Fill&& fill) {
  if (fc.call != call) {
    fc.p = ensure_aligned(fc.buf, n);
    fill(fc.p);
    fc.call = call;
  }
  return fc.p;
}

void conv2d_forward_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                           std::vector<float>& ws) {
  check_shape(sh);
  bool crsk = false;  // the direct kernel, on filters in CRSK order (filters_for_call)
#ifdef DLB_DIRECT_KERNELS
  crsk = !use_col_forward(sh) && use_direct_forward(sh);
#endif
  const std::uint64_t call = ++g_filter_calls;
  auto filters = [&]() -> const float* {
    thread_local FilterCopy fc;
    return crsk ? filters_for_call(fc, call, sh.w_size(), [&](float* f) { filters_to_crsk(sh, w, f); }) : nullptr;
  };
  if (!parallel_conv(sh)) return forward_serial(sh, x, w, bias, y, ws, filters());
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = crsk ? 1 : task_images(sh, sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    forward_serial(sub_batch(sh, i0, i1), x + i0 * xi, w, bias, y + i0 * yi, thread_ws(), filters());
  });
}

void conv2d_backward_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                 std::vector<float>& ws) {
  check_shape(sh);
  const bool rot = backward_data_as_forward(sh);
  bool crsk = false;
#ifdef DLB_DIRECT_KERNELS
  crsk = rot && use_direct_forward(rotated_shape(sh), true);
#endif
  const std::uint64_t call = ++g_filter_calls;
  auto filters = [&]() -> const float* {  // the rotated filters (filters_for_call), null when !rot
    thread_local FilterCopy fc;
    if (!rot) return nullptr;
    return filters_for_call(fc, call, sh.w_size(), [&](float* f) {
      if (crsk && use_cols_backward_data(sh)) rotate_filters_cols(sh, w, f);
      else if (crsk) rotate_filters_crsk(sh, w, f);
      else rotate_filters(sh, w, f);
    });
  };
  if (!parallel_conv(sh)) return backward_data_serial(sh, dy, w, dx, ws, filters(), crsk);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = crsk ? 1 : task_images(sh, rot ? rotated_shape(sh) : sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    backward_data_serial(sub_batch(sh, i0, i1), dy + i0 * yi, w, dx + i0 * xi, thread_ws(), filters(), crsk);
  });
}

namespace {
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
}  // namespace

void conv2d_backward_filter_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                   std::vector<float>& ws) {
  check_shape(sh);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  backward_filter_tasks(sh, dw, db, ws,
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>& w) {
                          backward_filter_serial(s, x + i0 * xi, dy + i0 * yi, pdw, pdb, w);
                        });
}

#ifdef DLB_DIRECT_KERNELS
namespace {
// ---- backward-filter from a pooled gradient, over the pool's winners only (AVX2) ----
// Behind ReLU + MaxPool2d(pk) the convolution's dy is nonzero only at each window's winner, and only
// where the pooled y > 0: at most one conv output in pk*pk. So dW[k][c][r][s] += g * x[c][ph + r][pw + s]
// runs over the winners alone (a quarter of the dense GEMM's multiply-adds for pk = 2, and neither a
// dense dy nor an im2col is written): per winner one FMA per filter row (c, r), the S <= 8 taps of
// the row in the lanes of one vector loaded at x[c][ph + r][pw] (the lanes past S accumulate
// neighbours into padding that is dropped), up to 8 row vectors of one output channel held in
// registers across all its windows. Windows whose winner ReLU stopped multiply by 0 rather than
// branch. A different summation order from the dense GEMM: equal to it within rounding, not bit for
// bit. Measured on a 2-core Zen 3, lecture net128 training (interleaved runs against the dense
// GEMM on the dense gradient made image by image): +5-10% imgs/s at batch 64 and 4.
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
// cache line each from L2, set the pace (~14 cycles per winner measured against ~22 for the AVX2
// kernel on a Zen 4: conv1 at batch 64, 4.9 -> 3.2 ms on 2 threads).
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
// conv1 at batch 64 on 2 threads (Zen 4): 3.3 -> 2.2-2.3 ms; with a cross-lane permute (vpermt2w)
// per vector instead of the unpacks, 2.9 ms; with 32-bit lanes (bf16 in the low or high half, ORed),
// as many bytes as fp32: 3.5 ms.
#define DLB_BF16_T __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,fma")))
#define DLB_BF16_INLINE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,fma"), always_inline)) inline
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
// pool_grad_filter_sparse's contract (S = the template's) in AVX-512.
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

using SparseFilterFn = void (*)(const Conv2dShape&, const float*, int, const float*, const float*,
                                const std::int32_t*, long, float*, float*);
// The instance for the shape's C x R (those of first layers: RGB or grey, 3x3 or 5x5), S <= 8, or null:
// the AVX-512 one for square 3x3 and 5x5 filters where DLB_CPU_ISA allows avx512, else AVX2.
SparseFilterFn pool_grad_filter_sparse_for(const Conv2dShape& sh) {
  if (sh.r == sh.s && (sh.c == 3 || sh.c == 1) && (sh.r == 5 || sh.r == 3) && isa_allows(Isa::avx512)) {
    if (sh.c == 3) return sh.r == 5 ? pool_grad_filter_sparse512<3, 5, 5> : pool_grad_filter_sparse512<3, 3, 3>;
    return sh.r == 5 ? pool_grad_filter_sparse512<1, 5, 5> : pool_grad_filter_sparse512<1, 3, 3>;
  }
  if (sh.s > 8 || !isa_allows(Isa::avx2)) return nullptr;
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

// Its bf16 instance (pool_grad_rows_bf16), for the same shapes where DLB_CPU_ISA allows avx512_bf16.
SparseFilterFn pool_grad_filter_sparse_bf16_for(const Conv2dShape& sh) {
  if (!(sh.r == sh.s && (sh.c == 3 || sh.c == 1) && (sh.r == 5 || sh.r == 3) && isa_allows(Isa::avx512_bf16)))
    return nullptr;
  if (sh.c == 3) return sh.r == 5 ? pool_grad_filter_sparse512<3, 5, 5, true> : pool_grad_filter_sparse512<3, 3, 3, true>;
  return sh.r == 5 ? pool_grad_filter_sparse512<1, 5, 5, true> : pool_grad_filter_sparse512<1, 3, 3, true>;
}
}  // namespace
#endif

bool conv2d_relu_pool_fusable(const Conv2dShape& sh, int k) {
#ifdef DLB_DIRECT_KERNELS
  // (arg holds flat indices into the whole convolution output: int32)
  return sh.valid() && k >= 1 && sh.p() >= k && sh.q() >= k && use_col_forward(sh) &&
         (use_col_backward_filter(sh) || use_col_backward_filter_avx2(sh)) &&
         double(sh.n) * sh.k * sh.p() * sh.q() < 2147483647.0;
#else
  (void)sh, (void)k;
  return false;
#endif
}

#ifdef DLB_DIRECT_KERNELS
void conv2d_forward_relu_pool(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                              float* y, std::int32_t* arg) {
  check_shape(sh);
  if (!conv2d_relu_pool_fusable(sh, k))
    throw std::invalid_argument("conv2d_forward_relu_pool: no fused kernel for " + sh.str());
  const int K = sh.k, P = sh.p(), Q = sh.q(), T = sh.c * sh.r * sh.s;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, PQ = std::size_t(P) * Q, yi = std::size_t(K) * (P / k) * (Q / k);
  auto image = [&](int n) {
    thread_local std::vector<float> out_buf;  // one image's convolution output (400 KB for conv1: L2)
    float* col = ensure_aligned(thread_ws(), std::size_t(T) * PQ);
    float* out = ensure_aligned(out_buf, std::size_t(K) * PQ);
    forward_col(sub_batch(sh, n, n + 1), x + n * xi, w, bias, out, col);
    maxpool2d_relu_forward_image(out, y + n * yi, arg + n * yi, K, P, Q, k, std::int32_t(std::size_t(n) * K * PQ));
  };
  if (!parallel_conv(sh)) {
    for (int n = 0; n < sh.n; ++n) image(n);
    return;
  }
  parallel_tasks(sh.n, image);
}

void conv2d_backward_filter_relu_pool(const Conv2dShape& sh, const float* x, int k, const float* dy, const float* y,
                                      const std::int32_t* arg, float* dw, float* db) {
  check_shape(sh);
  if (!conv2d_relu_pool_fusable(sh, k))
    throw std::invalid_argument("conv2d_backward_filter_relu_pool: no fused kernel for " + sh.str());
  const int K = sh.k, P = sh.p(), Q = sh.q();
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, PQ = std::size_t(P) * Q, yi = std::size_t(K) * (P / k) * (Q / k);
  // over the winners alone where an instance takes the shape, else the dense gradient image by image
  const SparseFilterFn sparse = pool_grad_filter_sparse_for(sh);
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
                          backward_filter_col(s, x + i0 * xi, dy_of, pdw, pdb, ws);
                        });
}

bool conv2d_relu_pool_bf16_fusable(const Conv2dShape& sh, int k) {
  return conv2d_relu_pool_fusable(sh, k) && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 &&
         sh.k % 4 == 0 && pool_grad_filter_sparse_bf16_for(sh) != nullptr;
}

bool conv2d_forward_relu_pool_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                                   float* y, std::int32_t* arg, std::uint16_t* y16) {
  check_shape(sh);
  if (!conv2d_relu_pool_bf16_fusable(sh, k) || (y16 && sh.k % 16 != 0)) return false;
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
  return true;
}

bool conv2d_backward_filter_relu_pool_bf16(const Conv2dShape& sh, const float* x, int k, const float* dy,
                                           const float* y, const std::int32_t* arg, float* dw, float* db) {
  check_shape(sh);
  const SparseFilterFn sparse = conv2d_relu_pool_fusable(sh, k) ? pool_grad_filter_sparse_bf16_for(sh) : nullptr;
  if (!sparse) return false;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w;
  backward_filter_tasks(sh, dw, db, thread_ws(),
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>&) {
                          sparse(s, x + i0 * xi, k, dy, y, arg, i0, pdw, pdb);
                        });
  return true;
}
#else
void conv2d_forward_relu_pool(const Conv2dShape& sh, const float*, const float*, const float*, int, float*,
                              std::int32_t*) {
  throw std::invalid_argument("conv2d_forward_relu_pool: no fused kernel for " + sh.str());
}
void conv2d_backward_filter_relu_pool(const Conv2dShape& sh, const float*, int, const float*, const float*,
                                      const std::int32_t*, float*, float*) {
  throw std::invalid_argument("conv2d_backward_filter_relu_pool: no fused kernel for " + sh.str());
}
bool conv2d_backward_filter_relu_pool_bf16(const Conv2dShape& sh, const float*, int, const float*, const float*,
                                           const std::int32_t*, float*, float*) {
  check_shape(sh);
  return false;
}
bool conv2d_relu_pool_bf16_fusable(const Conv2dShape&, int) { return false; }
bool conv2d_forward_relu_pool_bf16(const Conv2dShape& sh, const float*, const float*, const float*, int, float*,
                                   std::int32_t*, std::uint16_t*) {
  check_shape(sh);
  return false;
}
#endif

#ifdef DLB_DIRECT_KERNELS
namespace {
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

bool sparse_dy_shape(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 && sh.c % 16 == 0 &&
         isa_allows(Isa::avx512);
}

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
      for (int i0 = 0; i0 < HW; i0 += 16) transpose16(xn + std::size_t(c0) * HW + i0, HW, 16, std::min(16, HW - i0),
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
        transpose16(dxt + std::size_t(i0) * C + c0, C, std::min(16, HW - i0), 16, dxn + std::size_t(c0) * HW + i0, HW);
  }
  for (int k = 0; k < K; ++k)  // [K][R][S][C] -> KCRS, 16 x 16 blocks (strided single floats were ~5% of a step)
    for (int t0 = 0; t0 < RS; t0 += 16)
      for (int c0 = 0; c0 < C; c0 += 16)
        transpose16(acc + (std::size_t(k) * RS + t0) * C + c0, C, std::min(16, RS - t0), 16,
                    dw + (std::size_t(k) * C + c0) * RS + t0, RS);
  if (db)
    for (int k = 0; k < K; ++k) db[k] = float(bsum[k]);
}

template <bool BF>
bool backward_sparse_dy(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw, float* db,
                        float* dx) {
  check_shape(sh);
  if (!conv2d_backward_sparse_dy_shape(sh, BF)) return false;
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
}  // namespace

bool conv2d_backward_sparse_dy_shape(const Conv2dShape& sh, bool bf16) {
  return sh.valid() && sparse_dy_shape(sh) && (!bf16 || isa_allows(Isa::avx512_bf16));
}
bool conv2d_backward_sparse_dy(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                               float* db, float* dx) {
  return backward_sparse_dy<false>(sh, x, w, dy, dw, db, dx);
}
bool conv2d_backward_sparse_dy_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                                    float* db, float* dx) {
  return backward_sparse_dy<true>(sh, x, w, dy, dw, db, dx);
}
#else
bool conv2d_backward_sparse_dy_shape(const Conv2dShape&, bool) { return false; }
bool conv2d_backward_sparse_dy(const Conv2dShape& sh, const float*, const float*, const float*, float*, float*, float*) {
  check_shape(sh);
  return false;
}
bool conv2d_backward_sparse_dy_bf16(const Conv2dShape& sh, const float*, const float*, const float*, float*, float*,
                                    float*) {
  check_shape(sh);
  return false;
}
#endif

}  // namespace cpu
}  // namespace dlb
