// Training kernels on the GPU (see nn_ops.h). All are memory-bound: one read and one write per
// element (a few GB/s of the HBM's TB/s at lecture sizes), so they are plain grid-stride loops; the
// reductions (bias gradients, losses) use one block per output with a shared-memory tree. Each
// activation kernel is a template over the storage type T (float, __half, __nv_bfloat16): values are
// widened to float on load and rounded once on store (ld/st below).
#include "kernels/cuda/nn_ops.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {
constexpr int kThreads = 256;
int blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}
void check_launch() { DLB_CUDA_CHECK(cudaGetLastError()); }

__device__ __forceinline__ float ld(const float* p, std::size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, std::size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, std::size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, std::size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, std::size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, std::size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Calls f(T{}) with T the storage type of `t`: one switch for every typed launcher below.
template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: f(float{}); return;
    case DType::fp16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    default: throw Unsupported(std::string("GPU training ops: no ") + dtype_name(t) + " storage");
  }
}
template <class T> const T* in(const void* p) { return static_cast<const T*>(p); }
template <class T> T* out(void* p) { return static_cast<T*>(p); }

#define DLB_GRID_STRIDE(i, n) \
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < (n); i += std::size_t(blockDim.x) * gridDim.x)

__device__ float block_sum(float v) {
  __shared__ float sh[kThreads];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();
  return r;
}

template <class T>
__global__ void relu_fwd_k(const T* x, T* y, std::size_t n) {
  DLB_GRID_STRIDE(i, n) { const float v = ld(x, i); st(y, i, v > 0.f ? v : 0.f); }
}
template <class T>
__global__ void relu_bwd_k(const T* y, const T* dy, T* dx, std::size_t n) {
  DLB_GRID_STRIDE(i, n) st(dx, i, ld(y, i) > 0.f ? ld(dy, i) : 0.f);
}
template <class T>
__global__ void sigmoid_fwd_k(const T* x, T* y, std::size_t n) {
  DLB_GRID_STRIDE(i, n) st(y, i, 1.f / (1.f + expf(-ld(x, i))));
}
template <class T>
__global__ void sigmoid_bwd_k(const T* y, const T* dy, T* dx, std::size_t n) {
  DLB_GRID_STRIDE(i, n) { const float v = ld(y, i); st(dx, i, ld(dy, i) * v * (1.f - v)); }
}
template <class T>
__global__ void bias_rows_fwd_k(T* y, const T* b, int rows, int cols) {
  DLB_GRID_STRIDE(i, std::size_t(rows) * cols) st(y, i, ld(y, i) + ld(b, i % cols));
}
// one block per column
template <class T>
__global__ void bias_rows_bwd_k(const T* dy, T* db, int rows, int cols) {
  float s = 0.f;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) s += ld(dy, std::size_t(i) * cols + blockIdx.x);
  s = block_sum(s);
  if (threadIdx.x == 0) st(db, blockIdx.x, s);
}
template <class T>
__global__ void bias_nchw_fwd_k(T* y, const T* b, int n, int c, int hw) {
  DLB_GRID_STRIDE(i, std::size_t(n) * c * hw) st(y, i, ld(y, i) + ld(b, (i / hw) % c));
}
// one block per channel
template <class T>
__global__ void bias_nchw_bwd_k(const T* dy, T* db, int n, int c, int hw) {
  float s = 0.f;
  const std::size_t per = std::size_t(n) * hw;
  for (std::size_t t = threadIdx.x; t < per; t += blockDim.x) {
    const std::size_t img = t / hw, off = t % hw;
    s += ld(dy, (img * c + blockIdx.x) * hw + off);
  }
  s = block_sum(s);
  if (threadIdx.x == 0) st(db, blockIdx.x, s);
}
template <class T>
__global__ void maxpool_fwd_k(const T* x, T* y, std::int32_t* arg, int n, int c, int h, int w, int k) {
  const int p = h / k, q = w / k;
  DLB_GRID_STRIDE(o, std::size_t(n) * c * p * q) {
    const int j = int(o % q), i = int((o / q) % p);
    const std::size_t base = o / (std::size_t(p) * q) * h * w;
    int best = (i * k) * w + j * k;
    float bv = ld(x, base + best);
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        const int idx = (i * k + a) * w + j * k + b;
        const float v = ld(x, base + idx);
        if (v > bv) bv = v, best = idx;
      }
    st(y, o, bv);  // exact: a value of x
    arg[o] = static_cast<std::int32_t>(base + best);
  }
}
// Windows do not overlap (stride = window), so each input gets at most one contribution.
template <class T>
__global__ void scatter_k(const T* dy, const std::int32_t* arg, T* dx, std::size_t n) {
  DLB_GRID_STRIDE(i, n) dx[arg[i]] = dy[i];
}
// one thread per row (classes is small: 10); fp32 math whatever the logits' storage
template <class T>
__global__ void xent_k(const T* z, const std::int32_t* labels, int n, int classes, T* dz, float* loss_sum,
                       const float* grad_scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float l = 0.f;
  if (i < n) {
    const std::size_t r = std::size_t(i) * classes;
    float mx = -FLT_MAX;
    for (int j = 0; j < classes; ++j) mx = fmaxf(mx, ld(z, r + j));
    float s = 0.f;
    for (int j = 0; j < classes; ++j) s += expf(ld(z, r + j) - mx);
    const float lse = mx + logf(s);
    const int y = labels[i];
    l = (lse - ld(z, r + y)) / n;
    const float g = (grad_scale ? *grad_scale : 1.f) / n;
    for (int j = 0; j < classes; ++j) st(dz, r + j, (expf(ld(z, r + j) - lse) - (j == y ? 1.f : 0.f)) * g);
  }
  l = block_sum(l);
  if (threadIdx.x == 0) atomicAdd(loss_sum, l);
}
template <class T>
__global__ void mse_k(const T* p, const float* t, std::size_t count, T* d, float* loss_sum, const float* grad_scale) {
  float l = 0.f;
  const float scale = 2.f * (grad_scale ? *grad_scale : 1.f) / float(count);
  DLB_GRID_STRIDE(i, count) {
    const float e = ld(p, i) - t[i];
    l += e * e;
    st(d, i, scale * e);
  }
  l = block_sum(l);
  if (threadIdx.x == 0) atomicAdd(loss_sum, l / float(count));
}
__global__ void sgd_k(float* p, const float* g, float* buf, std::size_t n, float lr, float m, const float* skip) {
  if (skip && *skip != 0.f) return;
  DLB_GRID_STRIDE(i, n) {
    const float b = m * buf[i] + g[i];
    buf[i] = b;
    p[i] -= lr * b;
  }
}
__global__ void inc_k(int* t, const float* skip) {
  if (!skip || *skip == 0.f) *t += 1;
}
__global__ void adam_k(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2,
                       float eps, const int* step, const float* skip) {
  if (skip && *skip != 0.f) return;
  const float t = float(*step);
  const float bc1 = 1.f - powf(b1, t), bc2s = sqrtf(1.f - powf(b2, t));
  DLB_GRID_STRIDE(i, n) {
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    p[i] -= lr / bc1 * m[i] / (sqrtf(v[i]) / bc2s + eps);
  }
}
__global__ void gather_k(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first,
                         int n, std::size_t item, float* x, std::int32_t* y) {
  DLB_GRID_STRIDE(t, std::size_t(n) * item) {
    const std::size_t i = t / item, off = t % item;
    const std::size_t j = idx[first + i];
    x[t] = images[j * item + off];
    if (off == 0) y[i] = labels[j];
  }
}
}  // namespace

void relu_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    relu_fwd_k<T><<<blocks_for(n), kThreads, 0, s>>>(in<T>(x), out<T>(y), n);
  });
  check_launch();
}
void relu_backward(const void* y, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    relu_bwd_k<T><<<blocks_for(n), kThreads, 0, s>>>(in<T>(y), in<T>(dy), out<T>(dx), n);
  });
  check_launch();
}
void sigmoid_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    sigmoid_fwd_k<T><<<blocks_for(n), kThreads, 0, s>>>(in<T>(x), out<T>(y), n);
  });
  check_launch();
}
void sigmoid_backward(const void* y, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    sigmoid_bwd_k<T><<<blocks_for(n), kThreads, 0, s>>>(in<T>(y), in<T>(dy), out<T>(dx), n);
  });
  check_launch();
}
void bias_rows_forward(void* y, const void* b, int rows, int cols, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    bias_rows_fwd_k<T><<<blocks_for(std::size_t(rows) * cols), kThreads, 0, s>>>(out<T>(y), in<T>(b), rows, cols);
  });
  check_launch();
}
void bias_rows_backward(const void* dy, void* db, int rows, int cols, DType t, cudaStream_t s) {
  if (cols <= 0) return;  // a grid of 0 blocks is a launch error
  with_type(t, [&](auto z) {
    using T = decltype(z);
    bias_rows_bwd_k<T><<<cols, kThreads, 0, s>>>(in<T>(dy), out<T>(db), rows, cols);
  });
  check_launch();
}
void bias_nchw_forward(void* y, const void* b, int n, int c, int hw, DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    bias_nchw_fwd_k<T><<<blocks_for(std::size_t(n) * c * hw), kThreads, 0, s>>>(out<T>(y), in<T>(b), n, c, hw);
  });
  check_launch();
}
void bias_nchw_backward(const void* dy, void* db, int n, int c, int hw, DType t, cudaStream_t s) {
  if (c <= 0) return;
  with_type(t, [&](auto z) {
    using T = decltype(z);
    bias_nchw_bwd_k<T><<<c, kThreads, 0, s>>>(in<T>(dy), out<T>(db), n, c, hw);
  });
  check_launch();
}
void maxpool2d_forward(const void* x, void* y, std::int32_t* arg, int n, int c, int h, int w, int k, DType t,
                       cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    maxpool_fwd_k<T><<<blocks_for(std::size_t(n) * c * (h / k) * (w / k)), kThreads, 0, s>>>(in<T>(x), out<T>(y), arg,
                                                                                             n, c, h, w, k);
  });
  check_launch();
}
void maxpool2d_backward(const void* dy, const std::int32_t* arg, void* dx, std::size_t x_size, std::size_t y_size,
                        DType t, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    DLB_CUDA_CHECK(cudaMemsetAsync(dx, 0, x_size * sizeof(T), s));  // all-zero bits = +0 in every type
    scatter_k<T><<<blocks_for(y_size), kThreads, 0, s>>>(in<T>(dy), arg, out<T>(dx), y_size);
  });
  check_launch();
}
void softmax_xent(const void* logits, const std::int32_t* labels, int n, int classes, void* dlogits, float* loss_sum,
                  DType t, const float* grad_scale, cudaStream_t s) {
  if (n <= 0) return;
  with_type(t, [&](auto z) {
    using T = decltype(z);
    xent_k<T><<<(n + kThreads - 1) / kThreads, kThreads, 0, s>>>(in<T>(logits), labels, n, classes, out<T>(dlogits),
                                                                  loss_sum, grad_scale);
  });
  check_launch();
}
void mse(const void* pred, const float* target, std::size_t count, void* dpred, float* loss_sum, DType t,
         const float* grad_scale, cudaStream_t s) {
  with_type(t, [&](auto z) {
    using T = decltype(z);
    mse_k<T><<<blocks_for(count), kThreads, 0, s>>>(in<T>(pred), target, count, out<T>(dpred), loss_sum, grad_scale);
  });
  check_launch();
}
void sgd_momentum(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, cudaStream_t s,
                  const float* skip) {
  sgd_k<<<blocks_for(n), kThreads, 0, s>>>(p, g, buf, n, lr, momentum, skip);
  check_launch();
}
void increment(int* step, cudaStream_t s, const float* skip) {
  inc_k<<<1, 1, 0, s>>>(step, skip);
  check_launch();
}
void adam(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
          const int* step, cudaStream_t s, const float* skip) {
  adam_k<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, lr, b1, b2, eps, step, skip);
  check_launch();
}
void gather_batch(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first, int n,
                  std::size_t item, float* x, std::int32_t* y, cudaStream_t s) {
  gather_k<<<blocks_for(std::size_t(n) * item), kThreads, 0, s>>>(images, labels, idx, first, n, item, x, y);
  check_launch();
}

}  // namespace dlb::cuda
