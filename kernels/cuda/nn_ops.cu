// Training kernels on the GPU (see nn_ops.h). All are memory-bound: one read and one write per
// element (a few GB/s of the HBM's TB/s at lecture sizes), so they are plain grid-stride loops; the
// reductions (bias gradients, losses) use one block per output with a shared-memory tree.
#include "kernels/cuda/nn_ops.h"

#include <cfloat>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {
constexpr int kThreads = 256;
int blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}
void check_launch() { DLB_CUDA_CHECK(cudaGetLastError()); }

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

__global__ void relu_fwd_k(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void relu_bwd_k(const float* y, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}
__global__ void sigmoid_fwd_k(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    y[i] = 1.f / (1.f + expf(-x[i]));
}
__global__ void sigmoid_bwd_k(const float* y, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    dx[i] = dy[i] * y[i] * (1.f - y[i]);
}
__global__ void bias_rows_fwd_k(float* y, const float* b, int rows, int cols) {
  const std::size_t n = std::size_t(rows) * cols;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    y[i] += b[i % cols];
}
// one block per column
__global__ void bias_rows_bwd_k(const float* dy, float* db, int rows, int cols) {
  float s = 0.f;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) s += dy[std::size_t(i) * cols + blockIdx.x];
  s = block_sum(s);
  if (threadIdx.x == 0) db[blockIdx.x] = s;
}
__global__ void bias_nchw_fwd_k(float* y, const float* b, int n, int c, int hw) {
  const std::size_t total = std::size_t(n) * c * hw;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += std::size_t(blockDim.x) * gridDim.x)
    y[i] += b[(i / hw) % c];
}
// one block per channel
__global__ void bias_nchw_bwd_k(const float* dy, float* db, int n, int c, int hw) {
  float s = 0.f;
  const std::size_t per = std::size_t(n) * hw;
  for (std::size_t t = threadIdx.x; t < per; t += blockDim.x) {
    const std::size_t img = t / hw, off = t % hw;
    s += dy[(img * c + blockIdx.x) * hw + off];
  }
  s = block_sum(s);
  if (threadIdx.x == 0) db[blockIdx.x] = s;
}
__global__ void maxpool_fwd_k(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k) {
  const int p = h / k, q = w / k;
  const std::size_t total = std::size_t(n) * c * p * q;
  for (std::size_t o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += std::size_t(blockDim.x) * gridDim.x) {
    const int j = int(o % q), i = int((o / q) % p);
    const std::size_t plane = o / (std::size_t(p) * q);
    const float* xp = x + plane * h * w;
    int best = (i * k) * w + j * k;
    float bv = xp[best];
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        const int idx = (i * k + a) * w + j * k + b;
        if (xp[idx] > bv) bv = xp[idx], best = idx;
      }
    y[o] = bv;
    arg[o] = static_cast<std::int32_t>(plane * h * w + best);
  }
}
__global__ void scatter_k(const float* dy, const std::int32_t* arg, float* dx, std::size_t n) {
  // Windows do not overlap (stride = window), so each input gets at most one contribution.
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    dx[arg[i]] = dy[i];
}
// one thread per row (classes is small: 10)
__global__ void xent_k(const float* z, const std::int32_t* labels, int n, int classes, float* dz, float* loss_sum) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float l = 0.f;
  if (i < n) {
    const float* r = z + std::size_t(i) * classes;
    float mx = -FLT_MAX;
    for (int j = 0; j < classes; ++j) mx = fmaxf(mx, r[j]);
    float s = 0.f;
    for (int j = 0; j < classes; ++j) s += expf(r[j] - mx);
    const float lse = mx + logf(s);
    const int y = labels[i];
    l = (lse - r[y]) / n;
    for (int j = 0; j < classes; ++j) dz[std::size_t(i) * classes + j] = (expf(r[j] - lse) - (j == y ? 1.f : 0.f)) / n;
  }
  l = block_sum(l);
  if (threadIdx.x == 0) atomicAdd(loss_sum, l);
}
__global__ void mse_k(const float* p, const float* t, std::size_t count, float* d, float* loss_sum) {
  float l = 0.f;
  const float scale = 2.f / float(count);
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += std::size_t(blockDim.x) * gridDim.x) {
    const float e = p[i] - t[i];
    l += e * e;
    d[i] = scale * e;
  }
  l = block_sum(l);
  if (threadIdx.x == 0) atomicAdd(loss_sum, l / float(count));
}
__global__ void sgd_k(float* p, const float* g, float* buf, std::size_t n, float lr, float m) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x) {
    const float b = m * buf[i] + g[i];
    buf[i] = b;
    p[i] -= lr * b;
  }
}
__global__ void inc_k(int* t) { *t += 1; }
__global__ void adam_k(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2,
                       float eps, const int* step) {
  const float t = float(*step);
  const float bc1 = 1.f - powf(b1, t), bc2s = sqrtf(1.f - powf(b2, t));
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x) {
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    p[i] -= lr / bc1 * m[i] / (sqrtf(v[i]) / bc2s + eps);
  }
}
__global__ void gather_k(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first,
                         int n, std::size_t item, float* x, std::int32_t* y) {
  const std::size_t total = std::size_t(n) * item;
  for (std::size_t t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += std::size_t(blockDim.x) * gridDim.x) {
    const std::size_t i = t / item, off = t % item;
    const std::size_t j = idx[first + i];
    x[t] = images[j * item + off];
    if (off == 0) y[i] = labels[j];
  }
}
}  // namespace

void relu_forward(const float* x, float* y, std::size_t n, cudaStream_t s) {
  relu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  check_launch();
}
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n, cudaStream_t s) {
  relu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(y, dy, dx, n);
  check_launch();
}
void sigmoid_forward(const float* x, float* y, std::size_t n, cudaStream_t s) {
  sigmoid_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  check_launch();
}
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n, cudaStream_t s) {
  sigmoid_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(y, dy, dx, n);
  check_launch();
}
void bias_rows_forward(float* y, const float* b, int rows, int cols, cudaStream_t s) {
  bias_rows_fwd_k<<<blocks_for(std::size_t(rows) * cols), kThreads, 0, s>>>(y, b, rows, cols);
  check_launch();
}
void bias_rows_backward(const float* dy, float* db, int rows, int cols, cudaStream_t s) {
  bias_rows_bwd_k<<<cols, kThreads, 0, s>>>(dy, db, rows, cols);
  check_launch();
}
void bias_nchw_forward(float* y, const float* b, int n, int c, int hw, cudaStream_t s) {
  bias_nchw_fwd_k<<<blocks_for(std::size_t(n) * c * hw), kThreads, 0, s>>>(y, b, n, c, hw);
  check_launch();
}
void bias_nchw_backward(const float* dy, float* db, int n, int c, int hw, cudaStream_t s) {
  bias_nchw_bwd_k<<<c, kThreads, 0, s>>>(dy, db, n, c, hw);
  check_launch();
}
void maxpool2d_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k, cudaStream_t s) {
  maxpool_fwd_k<<<blocks_for(std::size_t(n) * c * (h / k) * (w / k)), kThreads, 0, s>>>(x, y, arg, n, c, h, w, k);
  check_launch();
}
void maxpool2d_backward(const float* dy, const std::int32_t* arg, float* dx, std::size_t x_size, std::size_t y_size,
                        cudaStream_t s) {
  DLB_CUDA_CHECK(cudaMemsetAsync(dx, 0, x_size * sizeof(float), s));
  scatter_k<<<blocks_for(y_size), kThreads, 0, s>>>(dy, arg, dx, y_size);
  check_launch();
}
void softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float* dlogits, float* loss_sum,
                  cudaStream_t s) {
  xent_k<<<(n + kThreads - 1) / kThreads, kThreads, 0, s>>>(logits, labels, n, classes, dlogits, loss_sum);
  check_launch();
}
void mse(const float* pred, const float* target, std::size_t count, float* dpred, float* loss_sum, cudaStream_t s) {
  mse_k<<<blocks_for(count), kThreads, 0, s>>>(pred, target, count, dpred, loss_sum);
  check_launch();
}
void sgd_momentum(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, cudaStream_t s) {
  sgd_k<<<blocks_for(n), kThreads, 0, s>>>(p, g, buf, n, lr, momentum);
  check_launch();
}
void increment(int* step, cudaStream_t s) {
  inc_k<<<1, 1, 0, s>>>(step);
  check_launch();
}
void adam(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
          const int* step, cudaStream_t s) {
  adam_k<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, lr, b1, b2, eps, step);
  check_launch();
}
void gather_batch(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first, int n,
                  std::size_t item, float* x, std::int32_t* y, cudaStream_t s) {
  gather_k<<<blocks_for(std::size_t(n) * item), kThreads, 0, s>>>(images, labels, idx, first, n, item, x, y);
  check_launch();
}

}  // namespace dlb::cuda
