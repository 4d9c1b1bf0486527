// Conv2d on the GPU (declared in conv2d.h).
//   CudnnConv2d: cuDNN 9's legacy convolution API (NCHW tensors, KCRS filters) with a per-shape
//     algorithm search like cudnn.benchmark: on the first call of a direction, cudnnFind*AlgorithmEx
//     times every algorithm on the caller's buffers; the fastest that succeeded is cached process-wide
//     by (device, shape, dtype, direction) and reused. Workspace through dlb::cuda::device_alloc.
//     dtype -> (tensor type, compute type, math): fp32 -> (FLOAT, FLOAT, FMA: no tensor cores, no TF32),
//     tf32 -> (FLOAT, FLOAT, TENSOR_OP), fp16 -> (HALF, FLOAT, TENSOR_OP), bf16 -> (BFLOAT16, FLOAT, TENSOR_OP).
//   conv2d_forward_implicit_gemm: our own fp32 kernel. The convolution as a GEMM without an im2col
//     buffer: Y[k][n,p,q] = sum over (c,r,s) of W[k][c,r,s] * X(c,r,s ; n,p,q), where the X operand is
//     gathered from the NCHW input on the fly (zero outside the padded border).
//     Tiles: 64 (k) x 64 (n*p*q) outputs per 256-thread block, 16-deep slices of c*r*s staged in
//     shared memory, 4x4 outputs per thread. Napkin math: per slice a block loads 2*64*16 floats and
//     does 64*64*16 FMAs -> 8 FMAs per shared-memory load pair; fine for a readable kernel, cuDNN's
//     tensor-core paths are the ceiling.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/nn_ops.h"

namespace dlb::cuda {

namespace {

// ------------------------------------------------------------------ algorithm names
const char* fwd_algo_name(int a) {
  static const char* n[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                             "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 8 ? n[a] : "UNKNOWN";
}
const char* bwd_data_algo_name(int a) {
  static const char* n[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 6 ? n[a] : "UNKNOWN";
}
const char* bwd_filter_algo_name(int a) {
  static const char* n[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return a >= 0 && a < 7 ? n[a] : "UNKNOWN";
}

// What the search keeps for one (device, shape, dtype, direction).
struct Choice {
  int algo = -1;
  std::size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  float ms = 0;  // the search's own timing of the winner
};

using CacheKey = std::tuple<int, std::string, int, int>;  // device, shape, dtype, direction
std::mutex g_cache_mu;
std::map<CacheKey, Choice>& cache() {
  static std::map<CacheKey, Choice> c;
  return c;
}

// Workspace offered to the search: the largest any candidate algorithm asks for, capped at half
// the free device memory and 1 GiB (so one giant FFT workspace cannot starve the rest).
std::size_t search_workspace_cap() {
  const auto mi = device_mem_info();
  return std::min<std::size_t>(mi.free_bytes / 2, std::size_t(1) << 30);
}

cudnnDataType_t tensor_type(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: return CUDNN_DATA_FLOAT;
    case DType::fp16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: throw Unsupported(std::string("cuDNN conv2d: dtype ") + dtype_name(t) + " not offered");
  }
}

cudnnMathType_t math_type(DType t) { return t == DType::fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH; }

// WINOGRAD_NONFUSED is left out of fp32's and tf32's searches. On an H100 (cuDNN 9.19, 2026-11-27,
// device-out call 1) it was the fastest forward for a 5x5 layer (n2 c128 14x14 k16) and for the
// lecture's conv2 at batch 4, and its output was 6.8e-3 off the fp64 direct convolution (max
// relative error) under FMA math and TENSOR_OP math alike, the same digits both ways (so the math
// type asked for does not reach that kernel). fp32's bound is 2e-4 (FFT/Winograd) and tf32's 2^-9, so a
// benchmark that verifies before it times must not pick it there; fp16 and bf16 keep it (their
// tolerance holds it).
bool allowed(DType t, bool winograd_nonfused) { return !(winograd_nonfused && (t == DType::fp32 || t == DType::tf32)); }

// Plain (non-owning) device workspace that grows on demand.
struct Workspace {
  void* p = nullptr;
  std::size_t bytes = 0;
  void reserve(std::size_t n) {
    if (n <= bytes) return;
    device_free(p);
    p = nullptr, bytes = 0;
    p = device_alloc(n);  // OutOfMemory on failure
    bytes = n;
  }
  ~Workspace() { device_free(p); }
};

}  // namespace

struct CudnnConv2d::Impl {
  Conv2dShape sh;
  DType dtype;
  int device = 0;
  std::string key;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice choice[3];
  bool have[3] = {false, false, false};
  // One workspace per direction, sized once when the direction is first called and never moved
  // after: a CUDA graph captured from one direction keeps a valid pointer when another direction is
  // set up later (one shared, growing workspace would be freed and reallocated under it). The cost
  // is the sum of the three workspaces instead of their maximum.
  Workspace ws[3];

  ~Impl() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }

  // Before the first call of a direction: the cached choice, or a search on these buffers; either
  // way the direction's workspace is allocated here, so this must not happen under graph capture
  // (checked before anything is allocated).
  void ensure(ConvDir dir, cudnnHandle_t h, const void* a0, const void* a1, void* out) {
    const int d = int(dir);
    if (have[d]) return;
    cudaStream_t st = nullptr;
    DLB_CUDNN_CHECK(cudnnGetStream(h, &st));
    refuse_inside_capture(st, "CudnnConv2d: a direction's first call (algorithm choice and workspace allocation) "
                              "cannot run inside CUDA graph capture; call each direction once before capturing");
    const CacheKey k{device, key, int(dtype), d};
    {
      std::lock_guard<std::mutex> lock(g_cache_mu);
      auto it = cache().find(k);
      if (it != cache().end()) {
        ws[d].reserve(it->second.workspace);  // may throw OutOfMemory: the direction stays unset
        choice[d] = it->second, have[d] = true;
        return;
      }
    }
    DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math_type(dtype)));
    const std::size_t cap_bytes = search_workspace_cap();
    Choice best;
    if (dir == ConvDir::forward) {
      std::size_t need = 0;
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        std::size_t sz = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, cudnnConvolutionFwdAlgo_t(a), &sz) ==
                CUDNN_STATUS_SUCCESS && sz <= cap_bytes)
          need = std::max(need, sz);
      }
      Workspace search;
      search.reserve(need);
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int got = 0;
      DLB_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, x, a0, w, a1, conv, y, out,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, search.p,
                                                             search.bytes));
      for (int i = 0; i < got; ++i)  // sorted by time; keep the fastest that ran
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            allowed(dtype, perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED)) {
          best = {int(perf[i].algo), perf[i].memory, perf[i].mathType, perf[i].time};
          break;
        }
    } else if (dir == ConvDir::backward_data) {
      std::size_t need = 0;
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a) {
        std::size_t sz = 0;
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(h, w, y, conv, x, cudnnConvolutionBwdDataAlgo_t(a), &sz) ==
                CUDNN_STATUS_SUCCESS && sz <= cap_bytes)
          need = std::max(need, sz);
      }
      Workspace search;
      search.reserve(need);
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int got = 0;
      // a0 = dy, a1 = w, out = dx
      DLB_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, w, a1, y, a0, conv, x, out,
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf,
                                                                  search.p, search.bytes));
      for (int i = 0; i < got; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            allowed(dtype, perf[i].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED)) {
          best = {int(perf[i].algo), perf[i].memory, perf[i].mathType, perf[i].time};
          break;
        }
    } else {
      std::size_t need = 0;
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a) {
        std::size_t sz = 0;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv, w, cudnnConvolutionBwdFilterAlgo_t(a),
                                                           &sz) == CUDNN_STATUS_SUCCESS && sz <= cap_bytes)
          need = std::max(need, sz);
      }
      Workspace search;
      search.reserve(need);
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int got = 0;
      // a0 = x, a1 = dy, out = dw
      DLB_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, x, a0, y, a1, conv, w, out,
                                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf,
                                                                    search.p, search.bytes));
      for (int i = 0; i < got; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            allowed(dtype, perf[i].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED)) {
          best = {int(perf[i].algo), perf[i].memory, perf[i].mathType, perf[i].time};
          break;
        }
    }
    if (best.algo < 0)
      throw Unsupported("cuDNN: no convolution algorithm ran for " + sh.str() + " " + dtype_name(dtype));
    // fp32 means fp32: never let a result reported with DEFAULT math (which permits TF32) run so.
    if (dtype == DType::fp32) best.math = CUDNN_FMA_MATH;
    {
      std::lock_guard<std::mutex> lock(g_cache_mu);
      cache()[k] = best;
    }
    ws[d].reserve(best.workspace);
    choice[d] = best, have[d] = true;
  }
};

CudnnConv2d::CudnnConv2d(const Conv2dShape& shape, DType dtype) : impl_(new Impl) {
  auto& m = *impl_;
  try {
    if (!shape.valid()) throw UsageError("CudnnConv2d: invalid shape " + shape.str());
    m.sh = shape, m.dtype = dtype, m.key = shape.str();
    const cudnnDataType_t t = tensor_type(dtype);
    DLB_CUDA_CHECK(cudaGetDevice(&m.device));
    DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.x));
    DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.y));
    DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.b));
    DLB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m.w));
    DLB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&m.conv));
    DLB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.x, CUDNN_TENSOR_NCHW, t, shape.n, shape.c, shape.h, shape.w));
    DLB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.y, CUDNN_TENSOR_NCHW, t, shape.n, shape.k, shape.p(), shape.q()));
    DLB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(m.b, CUDNN_TENSOR_NCHW, t, 1, shape.k, 1, 1));
    DLB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(m.w, t, CUDNN_TENSOR_NCHW, shape.k, shape.c, shape.r, shape.s));
    // Accumulation in fp32 for every dtype (PSEUDO_HALF / PSEUDO_BFLOAT16 configurations).
    DLB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(m.conv, shape.pad_h, shape.pad_w, shape.stride_h, shape.stride_w,
                                                    1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, math_type(dtype)));
    int on, oc, oh, ow;
    DLB_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(m.conv, m.x, m.w, &on, &oc, &oh, &ow));
    if (on != shape.n || oc != shape.k || oh != shape.p() || ow != shape.q())
      throw std::logic_error("CudnnConv2d: cuDNN's output shape differs from Conv2dShape for " + shape.str());
  } catch (...) {
    delete impl_;
    throw;
  }
}

CudnnConv2d::~CudnnConv2d() { delete impl_; }

void CudnnConv2d::forward(const void* x, const void* w, const void* bias, void* y, cudaStream_t stream) {
  auto& m = *impl_;
  cudnnHandle_t h = cudnn_handle_on(stream);
  m.ensure(ConvDir::forward, h, x, w, y);
  const Choice& c = m.choice[0];
  DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, c.math));
  const float one = 1.f, zero = 0.f;
  DLB_CUDNN_CHECK(cudnnConvolutionForward(h, &one, m.x, x, m.w, w, m.conv, cudnnConvolutionFwdAlgo_t(c.algo), m.ws[0].p,
                                          c.workspace, &zero, m.y, y));
  if (!bias) return;
  // Half types through our kernel: cuDNN's AddTensor may refuse bf16 (NOT_SUPPORTED); the trainer
  // does the same (models/cuda/gpu_trainer.cu).
  if (m.dtype == DType::fp16 || m.dtype == DType::bf16)
    bias_nchw_forward(y, bias, m.sh.n, m.sh.k, m.sh.p() * m.sh.q(), m.dtype, stream);
  else
    DLB_CUDNN_CHECK(cudnnAddTensor(h, &one, m.b, bias, &one, m.y, y));
}

void CudnnConv2d::backward_data(const void* dy, const void* w, void* dx, cudaStream_t stream) {
  auto& m = *impl_;
  cudnnHandle_t h = cudnn_handle_on(stream);
  m.ensure(ConvDir::backward_data, h, dy, w, dx);
  const Choice& c = m.choice[1];
  DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, c.math));
  const float one = 1.f, zero = 0.f;
  DLB_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, m.w, w, m.y, dy, m.conv,
                                               cudnnConvolutionBwdDataAlgo_t(c.algo), m.ws[1].p, c.workspace, &zero, m.x,
                                               dx));
}

void CudnnConv2d::backward_filter(const void* x, const void* dy, void* dw, void* db, cudaStream_t stream) {
  auto& m = *impl_;
  cudnnHandle_t h = cudnn_handle_on(stream);
  m.ensure(ConvDir::backward_filter, h, x, dy, dw);
  const Choice& c = m.choice[2];
  DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, c.math));
  const float one = 1.f, zero = 0.f;
  DLB_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, m.x, x, m.y, dy, m.conv,
                                                 cudnnConvolutionBwdFilterAlgo_t(c.algo), m.ws[2].p, c.workspace, &zero,
                                                 m.w, dw));
  if (!db) return;
  // As in forward: the half-type bias gradient by our reduction, not cudnnConvolutionBackwardBias.
  if (m.dtype == DType::fp16 || m.dtype == DType::bf16)
    bias_nchw_backward(dy, db, m.sh.n, m.sh.k, m.sh.p() * m.sh.q(), m.dtype, stream);
  else
    DLB_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, m.y, dy, &zero, m.b, db));
}

const void* CudnnConv2d::workspace(ConvDir dir) const { return impl_->ws[int(dir)].p; }

std::string CudnnConv2d::algo_name(ConvDir dir) const {
  const int d = int(dir);
  if (!impl_->have[d]) return "not searched";
  const int a = impl_->choice[d].algo;
  std::string name = dir == ConvDir::forward         ? fwd_algo_name(a)
                     : dir == ConvDir::backward_data ? bwd_data_algo_name(a)
                                                     : bwd_filter_algo_name(a);
  if (impl_->choice[d].math == CUDNN_TENSOR_OP_MATH || impl_->choice[d].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
    name += "+TENSOR_OP";
  return name;
}

double CudnnConv2d::tolerance(ConvDir dir) const {
  const double base = default_tolerance(impl_->dtype);
  if (impl_->dtype != DType::fp32) return base;
  const std::string a = algo_name(dir);
  return a.find("FFT") != std::string::npos || a.find("WINOGRAD") != std::string::npos ? 2e-4 : base;
}

// ------------------------------------------------------------------ our implicit GEMM (fp32)
namespace {

constexpr int kTM = 64, kTN = 64, kTK = 16, kThreads = 256;

// GEMM view: M = k (out channels), N = n*p*q, K = c*r*s. Block (bx, by) computes outputs
// [by*64, +64) x [bx*64, +64); thread (ty, tx) = (tid / 16, tid % 16) owns rows ty + 16*i and
// columns tx + 16*j (i, j < 4), so stores along n*p*q are coalesced.
__global__ void __launch_bounds__(kThreads)
    conv2d_forward_implicit_gemm_kernel(Conv2dShape sh, int P, int Q, const float* __restrict__ x,
                                        const float* __restrict__ w, const float* __restrict__ bias,
                                        float* __restrict__ y) {
  __shared__ float As[kTK][kTM];  // W slice, transposed: As[crs][k]
  __shared__ float Bs[kTK][kTN];  // gathered X slice: Bs[crs][npq]
  const int RS = sh.r * sh.s, CRS = sh.c * RS;
  const long long PQ = (long long)P * Q, NPQ = PQ * sh.n;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * kTM;
  const long long n0 = (long long)blockIdx.x * kTN;

  // The B loads of this thread always hit column nn = tid % 64 of the tile: decode it once.
  const int nn = tid % kTN;
  const long long col = n0 + nn;
  const bool col_ok = col < NPQ;
  int img = 0, oh = 0, ow = 0;
  if (col_ok) {
    img = int(col / PQ);
    const int pq = int(col % PQ);
    oh = pq / Q, ow = pq % Q;
  }
  const int ih0 = oh * sh.stride_h - sh.pad_h, iw0 = ow * sh.stride_w - sh.pad_w;
  const float* ximg = x + (long long)img * sh.c * sh.h * sh.w;

  float acc[4][4] = {};
  for (int k0 = 0; k0 < CRS; k0 += kTK) {
    // A: 64 x 16 floats, 4 per thread; consecutive threads read consecutive crs of one filter.
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int e = tid + kThreads * l, m = e / kTK, kk = e % kTK;
      const int row = m0 + m, crs = k0 + kk;
      As[kk][m] = (row < sh.k && crs < CRS) ? w[(long long)row * CRS + crs] : 0.f;
    }
    // B: 16 x 64 floats, 4 per thread (rows tid/64 + 4*l), gathered from x with zero padding.
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int kk = tid / kTN + 4 * l, crs = k0 + kk;
      float v = 0.f;
      if (col_ok && crs < CRS) {
        const int c = crs / RS, rs = crs % RS, r = rs / sh.s, s = rs % sh.s;
        const int ih = ih0 + r, iw = iw0 + s;
        if (ih >= 0 && ih < sh.h && iw >= 0 && iw < sh.w) v = ximg[((long long)c * sh.h + ih) * sh.w + iw];
      }
      Bs[kk][nn] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Epilogue: (+ bias) and scatter to NCHW.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const long long cj = n0 + tx + 16 * j;
    if (cj >= NPQ) continue;
    const long long im = cj / PQ, pq = cj % PQ;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = m0 + ty + 16 * i;
      if (row >= sh.k) continue;
      y[(im * sh.k + row) * PQ + pq] = acc[i][j] + (bias ? bias[row] : 0.f);
    }
  }
}

}  // namespace

void conv2d_forward_implicit_gemm(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                                  cudaStream_t stream) {
  if (!sh.valid()) throw UsageError("conv2d_forward_implicit_gemm: invalid shape " + sh.str());
  const long long npq = (long long)sh.n * sh.p() * sh.q();
  const long long gx = (npq + kTN - 1) / kTN;
  if (gx > 0x7fffffffLL) throw Unsupported("conv2d_forward_implicit_gemm: n*p*q too large for the grid");
  const dim3 grid(unsigned(gx), unsigned((sh.k + kTM - 1) / kTM));
  if (grid.y > 65535) throw Unsupported("conv2d_forward_implicit_gemm: too many output channels for the grid");
  conv2d_forward_implicit_gemm_kernel<<<grid, kThreads, 0, stream>>>(sh, sh.p(), sh.q(), x, w, bias, y);
  DLB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dlb::cuda
