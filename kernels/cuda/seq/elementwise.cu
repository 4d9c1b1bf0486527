// GELU, Philox dropout and AdamW on the GPU (see elementwise.h): grid-stride loops; dropout gives
// each thread one Philox block of 4 elements, as the CPU draws them.
#include "kernels/cuda/seq/elementwise.h"

#include <cmath>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/seq/common.cuh"

namespace dlb::cuda::seq {
namespace {

template <class F>
void with_storage(DType t, const char* what, F&& f) {
  if (t == DType::fp32) return f(float{});
  if (t == DType::bf16) return f(__nv_bfloat16{});
  throw Unsupported(std::string(what) + ": no " + dtype_name(t) + " storage on the GPU (fp32, bf16)");
}

template <class T>
__global__ void gelu_k(const T* x, const T* dy, T* out, std::size_t n) {
  const float s2pi = 0.7978845608f, c = 0.044715f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(blockDim.x) * gridDim.x) {
    const float v = ldf(x, i), t = tanhf(s2pi * (v + c * v * v * v));
    if (!dy) {
      stf(out, i, 0.5f * v * (1.f + t));
    } else {
      const float dt = (1.f - t * t) * s2pi * (1.f + 3.f * c * v * v);
      stf(out, i, ldf(dy, i) * 0.5f * (1.f + t + v * dt));
    }
  }
}

// Thread b draws block first_block + b: its 4 words are elements 64 g + 16 k + j (philox_element's
// map, g = block / 16, j = block % 16) that fall in [offset, offset + n). *offset_add (a multiple of
// 64) moves offset and first_block alike: the launch's shape does not depend on it.
template <class T>
__global__ void dropout_k(const T* x, T* y, std::uint8_t* mask, std::size_t n, float p, float scale,
                          std::uint64_t seed, std::uint64_t offset, std::uint64_t first_block, std::uint64_t blocks,
                          const std::uint64_t* offset_add) {
  if (offset_add) {
    const std::uint64_t add = *offset_add;
    offset += add, first_block += add / 64 * 16;
  }
  for (std::uint64_t b = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; b < blocks;
       b += std::uint64_t(blockDim.x) * gridDim.x) {
    const std::uint64_t blk = first_block + b;
    const Philox4 r = philox_block(seed, blk);
    for (int k = 0; k < 4; ++k) {
      const std::uint64_t e = blk / 16 * 64 + 16 * std::uint64_t(k) + blk % 16;
      if (e < offset || e >= offset + n) continue;
      const std::size_t i = e - offset;
      const bool keep = !(philox_uniform(r.v[k]) < p);
      stf(y, i, keep ? ldf(x, i) * scale : 0.f);
      if (mask) mask[i] = keep;
    }
  }
}

// The bias corrections from the host (dstep null) or from *dstep: then one thread per block computes
// them in fp64 as the host does (pow per block, not per element); the block returns when *skip.
__global__ void adamw_k(float* p, const float* g, float* m, float* v, std::size_t n, float decay, float step_size,
                        float bc2s, float a1, float b2, float a2, float eps, const int* dstep, float lr, float b1,
                        const float* skip) {
  if (skip && *skip != 0.f) return;
  if (dstep) {
    __shared__ float sh[2];
    if (threadIdx.x == 0) {
      const double t = *dstep;  // pow(double, double), as the host computes it
      sh[0] = float(double(lr) / (1 - pow(double(b1), t)));
      sh[1] = float(sqrt(1 - pow(double(b2), t)));
    }
    __syncthreads();
    step_size = sh[0], bc2s = sh[1];
  }
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(blockDim.x) * gridDim.x) {
    const float gi = g[i], mi = m[i] + a1 * (gi - m[i]), vi = b2 * v[i] + a2 * gi * gi;
    m[i] = mi, v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bc2s + eps);
  }
}

__global__ void add_broadcast_k(const float* x, const float* row, float* y, std::size_t n, std::size_t period) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(blockDim.x) * gridDim.x)
    y[i] = x[i] + row[i % period];
}

template <class T>
void dropout_launch(const void* x, void* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                    std::uint64_t offset, cudaStream_t s, const std::uint64_t* offset_add) {
  if (n == 0) return;
  const std::uint64_t first = offset / 64 * 16, blocks = (offset + n + 63) / 64 * 16 - first;  // whole groups
  dropout_k<T><<<grid_for(blocks), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), mask, n, p,
                                                     p < 1.f ? 1.f / (1.f - p) : 0.f, seed, offset, first, blocks,
                                                     offset_add);
}

__global__ void set_u64_k(std::uint64_t* p, std::uint64_t v) { *p = v; }

}  // namespace

void gelu_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s) {
  with_storage(t, "gelu", [&](auto z) {
    using T = decltype(z);
    gelu_k<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), nullptr, static_cast<T*>(y), n);
  });
  check_launch();
}

void gelu_backward(const void* x, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s) {
  with_storage(t, "gelu", [&](auto z) {
    using T = decltype(z);
    gelu_k<T>
        <<<grid_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
  });
  check_launch();
}

void dropout_forward(const void* x, void* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                     std::uint64_t offset, DType t, cudaStream_t s, const std::uint64_t* offset_add) {
  with_storage(t, "dropout",
               [&](auto z) { dropout_launch<decltype(z)>(x, y, mask, n, p, seed, offset, s, offset_add); });
  check_launch();
}

void dropout_backward(const void* dy, void* dx, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset,
                      DType t, cudaStream_t s, const std::uint64_t* offset_add) {
  with_storage(t, "dropout",
               [&](auto z) { dropout_launch<decltype(z)>(dy, dx, nullptr, n, p, seed, offset, s, offset_add); });
  check_launch();
}

void set_u64(std::uint64_t* p, std::uint64_t v, cudaStream_t s) {
  set_u64_k<<<1, 1, 0, s>>>(p, v);
  check_launch();
}

void add_broadcast(const float* x, const float* row, float* y, std::size_t n, std::size_t period, cudaStream_t s) {
  if (n == 0) return;
  add_broadcast_k<<<grid_for(n), kThreads, 0, s>>>(x, row, y, n, period);
  check_launch();
}

void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const cpu::seq::AdamW& o, long step,
                cudaStream_t s) {
  const double bc1 = 1 - std::pow(double(o.beta1), step), bc2 = 1 - std::pow(double(o.beta2), step);
  adamw_k<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n, float(1 - double(o.lr) * o.weight_decay), float(o.lr / bc1),
                                           float(std::sqrt(bc2)), 1.f - o.beta1, o.beta2, 1.f - o.beta2, o.eps,
                                           nullptr, o.lr, o.beta1, nullptr);
  check_launch();
}

void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const cpu::seq::AdamW& o, const int* step,
                cudaStream_t s, const float* skip) {
  if (n == 0) return;
  adamw_k<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n, float(1 - double(o.lr) * o.weight_decay), 0.f, 0.f,
                                           1.f - o.beta1, o.beta2, 1.f - o.beta2, o.eps, step, o.lr, o.beta1, skip);
  check_launch();
}

}  // namespace dlb::cuda::seq
