// Softmax, the fused classifier and LayerNorm on the GPU (see rows.h): a block per row, the row read
// once per pass through L1/L2.
#include "kernels/cuda/seq/rows.h"

#include "kernels/cuda/seq/common.cuh"

namespace dlb::cuda::seq {
namespace {

__device__ __forceinline__ int valid_cols(long r, int cols, int causal_tq) {
  if (causal_tq <= 0) return cols;
  const long v = r % causal_tq + 1;
  return v < cols ? int(v) : cols;
}

// Exponentials of x - max over the first n columns into e (may alias x); returns their sum.
__device__ float exp_pass(const float* x, float* e, int n, float* sh, float& mx) {
  float m = -FLT_MAX;
  for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
  mx = block_max(m, sh);
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = expf(x[j] - mx);
    e[j] = v;
    s += v;
  }
  return block_sum(s, sh);
}

__global__ void softmax_fwd_k(const float* x, float* y, int cols, int causal_tq) {
  __shared__ float sh[32];
  const long r = blockIdx.x;
  x += r * cols, y += r * cols;
  const int n = valid_cols(r, cols, causal_tq);
  float mx;
  const float inv = 1.f / exp_pass(x, y, n, sh, mx);
  for (int j = threadIdx.x; j < cols; j += blockDim.x) y[j] = j < n ? y[j] * inv : 0.f;
}

__global__ void softmax_bwd_k(const float* y, const float* dy, float* dx, int cols, int causal_tq) {
  __shared__ float sh[32];
  const long r = blockIdx.x;
  y += r * cols, dy += r * cols, dx += r * cols;
  const int n = valid_cols(r, cols, causal_tq);
  float d = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) d += dy[j] * y[j];
  const float dot = block_sum(d, sh);
  for (int j = threadIdx.x; j < cols; j += blockDim.x) dx[j] = j < n ? y[j] * (dy[j] - dot) : 0.f;
}

__global__ void count_targets_k(const int* targets, long rows, int* count) {
  __shared__ float sh[32];
  float c = 0.f;
  for (long r = threadIdx.x; r < rows; r += blockDim.x) c += targets[r] >= 0;
  c = block_sum(c, sh);
  if (threadIdx.x == 0) *count = int(c + 0.5f);
}

__global__ void classifier_k(const float* logits, const int* targets, int V, int ld, float* losses, float* dlogits,
                             const int* count, const float* scale) {
  __shared__ float sh[32];
  const long r = blockIdx.x;
  const float* x = logits + r * ld;
  float* d = dlogits ? dlogits + r * ld : nullptr;
  const int t = targets[r];
  if (t < 0) {
    if (d)
      for (int j = threadIdx.x; j < ld; j += blockDim.x) d[j] = 0.f;
    if (threadIdx.x == 0) losses[r] = 0.f;
    return;
  }
  const float xt = x[t];  // before d (which may be x) changes
  __syncthreads();
  float m = -FLT_MAX;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, x[j]);
  const float mx = block_max(m, sh);
  float s = 0.f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float e = expf(x[j] - mx);
    if (d) d[j] = e;
    s += e;
  }
  const float sum = block_sum(s, sh);
  if (threadIdx.x == 0) losses[r] = logf(sum) + mx - xt;
  if (!d) return;
  const float inv = (scale ? *scale : 1.f) / float(*count), sc = inv / sum;
  for (int j = threadIdx.x; j < ld; j += blockDim.x) d[j] = j < V ? d[j] * sc - (j == t ? inv : 0.f) : 0.f;
}

// *loss = sum of losses (each thread its strided rows in order, then the fixed tree) / *count.
__global__ void mean_loss_k(const float* losses, long rows, const int* count, float* loss) {
  __shared__ float sh[32];
  float s = 0.f;
  for (long r = threadIdx.x; r < rows; r += blockDim.x) s += losses[r];
  s = block_sum(s, sh);
  if (threadIdx.x == 0) *loss = *count ? s / float(*count) : 0.f;
}

__global__ void layernorm_fwd_k(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                                int C, float eps) {
  __shared__ float sh[32];
  const long r = blockIdx.x;
  x += r * C, y += r * C;
  float s = 0.f;
  for (int j = threadIdx.x; j < C; j += blockDim.x) s += x[j];
  const float m = block_sum(s, sh) / C;
  float q = 0.f;
  for (int j = threadIdx.x; j < C; j += blockDim.x) q += (x[j] - m) * (x[j] - m);
  const float rs = rsqrtf(block_sum(q, sh) / C + eps);
  for (int j = threadIdx.x; j < C; j += blockDim.x)
    y[j] = (x[j] - m) * rs * (w ? w[j] : 1.f) + (b ? b[j] : 0.f);
  if (threadIdx.x == 0) mean[r] = m, rstd[r] = rs;
}

__global__ void layernorm_bwd_dx_k(const float* dy, const float* x, const float* w, const float* mean,
                                   const float* rstd, float* dx, int C) {
  __shared__ float sh[32];
  const long r = blockIdx.x;
  dy += r * C, x += r * C, dx += r * C;
  const float m = mean[r], rs = rstd[r];
  float g = 0.f, gn = 0.f;
  for (int j = threadIdx.x; j < C; j += blockDim.x) {
    const float gj = dy[j] * (w ? w[j] : 1.f);
    g += gj, gn += gj * (x[j] - m) * rs;
  }
  const float gm = block_sum(g, sh) / C, gnm = block_sum(gn, sh) / C;
  for (int j = threadIdx.x; j < C; j += blockDim.x)
    dx[j] = rs * (dy[j] * (w ? w[j] : 1.f) - gm - (x[j] - m) * rs * gnm);
}

constexpr int kLnChunk = 32;  // rows a dw/db partial sums, as the CPU
__global__ void layernorm_bwd_partial_k(const float* dy, const float* x, const float* mean, const float* rstd,
                                        long rows, int C, float* part) {
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const long r0 = long(blockIdx.x) * kLnChunk, r1 = min(rows, r0 + kLnChunk);
  float dw = 0.f, db = 0.f;
  for (long r = r0; r < r1; ++r) {
    const float d = dy[r * C + c];
    dw += d * (x[r * C + c] - mean[r]) * rstd[r];
    db += d;
  }
  part[blockIdx.x * 2L * C + c] = dw;
  part[blockIdx.x * 2L * C + C + c] = db;
}
__global__ void layernorm_bwd_sum_k(const float* part, long chunks, int C, float* dw, float* db) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sw = 0.f, sb = 0.f;
  for (long k = 0; k < chunks; ++k) sw += part[k * 2 * C + c], sb += part[k * 2 * C + C + c];
  if (dw) dw[c] = sw;
  if (db) db[c] = sb;
}

int row_threads(int cols) { return cols >= 1024 ? 256 : cols >= 256 ? 128 : 64; }

}  // namespace

void softmax_forward(const float* x, float* y, long rows, int cols, int causal_tq, cudaStream_t s) {
  if (rows <= 0) return;
  softmax_fwd_k<<<rows, row_threads(cols), 0, s>>>(x, y, cols, causal_tq);
  check_launch();
}

void softmax_backward(const float* y, const float* dy, float* dx, long rows, int cols, int causal_tq, cudaStream_t s) {
  if (rows <= 0) return;
  softmax_bwd_k<<<rows, row_threads(cols), 0, s>>>(y, dy, dx, cols, causal_tq);
  check_launch();
}

void classifier_forward_backward(const float* logits, const int* targets, long rows, int V, int ld, float* losses,
                                 float* dlogits, float* loss, int* scratch, cudaStream_t s, const float* scale) {
  if (rows <= 0) return;
  count_targets_k<<<1, 1024, 0, s>>>(targets, rows, scratch);
  classifier_k<<<rows, row_threads(V), 0, s>>>(logits, targets, V, ld, losses, dlogits, scratch, scale);
  mean_loss_k<<<1, 1024, 0, s>>>(losses, rows, scratch, loss);
  check_launch();
}

void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, long rows,
                       int C, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  layernorm_fwd_k<<<rows, row_threads(C), 0, s>>>(x, w, b, y, mean, rstd, C, eps);
  check_launch();
}

std::size_t layernorm_backward_scratch_bytes(long rows, int C) {
  return sizeof(float) * 2 * std::size_t(C) * ((rows + kLnChunk - 1) / kLnChunk);
}

void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                        float* dx, float* dw, float* db, long rows, int C, void* scratch, cudaStream_t s) {
  if (rows <= 0) return;
  layernorm_bwd_dx_k<<<rows, row_threads(C), 0, s>>>(dy, x, w, mean, rstd, dx, C);
  if (dw || db) {
    const long chunks = (rows + kLnChunk - 1) / kLnChunk;
    float* part = static_cast<float*>(scratch);
    layernorm_bwd_partial_k<<<dim3(unsigned(chunks), unsigned((C + 127) / 128)), 128, 0, s>>>(dy, x, mean, rstd, rows,
                                                                                              C, part);
    layernorm_bwd_sum_k<<<(C + 127) / 128, 128, 0, s>>>(part, chunks, C, dw, db);
  }
  check_launch();
}

}  // namespace dlb::cuda::seq
