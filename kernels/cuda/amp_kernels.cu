// GPU mixed-precision kernels (see amp_kernels.h). All bandwidth-bound: a cast moves 6 bytes per
// element, the unscale+check 8 (read + write fp32); at ~3 TB/s (H100) 1M elements take ~2-3 us.
#include "kernels/cuda/amp_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(std::size_t n) {
  // grid-stride loops: enough blocks to fill the GPU, capped so tiny launches stay tiny
  return static_cast<int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 65535));
}

// __float2half_rn / __float2bfloat16_rn: round to nearest even, overflow to inf, subnormals kept.
__global__ void cast_fp32_to_fp16_kernel(const float* __restrict__ s, std::uint16_t* __restrict__ d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    d[i] = __half_as_ushort(__float2half_rn(s[i]));
}
__global__ void cast_fp16_to_fp32_kernel(const std::uint16_t* __restrict__ s, float* __restrict__ d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    d[i] = __half2float(__ushort_as_half(s[i]));
}
__global__ void cast_fp32_to_bf16_kernel(const float* __restrict__ s, std::uint16_t* __restrict__ d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    d[i] = __bfloat16_as_ushort(__float2bfloat16_rn(s[i]));
}
__global__ void cast_bf16_to_fp32_kernel(const std::uint16_t* __restrict__ s, float* __restrict__ d, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    d[i] = __uint_as_float(static_cast<unsigned>(s[i]) << 16);  // exact widening
}

// A strided fp32 matrix (rows x cols, leading dimension ld) to a packed 16-bit one (leading
// dimension cols), with the same rounding as the casts above: gemm_f32's operands (cublas_gemm.cpp).
template <bool kBf16>
__global__ void cast_2d_kernel(const float* __restrict__ s, long ld, long rows, long cols, std::uint16_t* __restrict__ d) {
  const std::size_t n = std::size_t(rows) * std::size_t(cols);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = s[(i / cols) * ld + i % cols];
    d[i] = kBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
  }
}

// Fused unscale + finiteness check: one read and one write per element; a block-wide OR decides
// whether this block saw a non-finite value, and one thread writes the flag (a benign race: every
// writer stores 1.0f).
__device__ void unscale_check_range(float* g, std::size_t n, float inv, float* found_inf) {
  int bad = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = g[i];
    bad |= !isfinite(v);
    g[i] = v * inv;
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

__global__ void unscale_check_kernel(float* g, std::size_t n, const float* inv_scale, float* found_inf) {
  unscale_check_range(g, n, *inv_scale, found_inf);
}

// blockIdx.y picks the tensor; blockIdx.x strides over it.
__global__ void unscale_check_multi_kernel(float* const* ptrs, const std::size_t* sizes, const float* inv_scale,
                                           float* found_inf) {
  unscale_check_range(ptrs[blockIdx.y], sizes[blockIdx.y], *inv_scale, found_inf);
}

__global__ void update_scale_kernel(float* scale, float* inv_scale, int* tracker, float* found_inf, float growth,
                                    float backoff, int interval) {
  if (*found_inf != 0.0f) {
    *scale *= backoff;
    *tracker = 0;
  } else {
    const int t = *tracker + 1;
    if (t == interval) {
      const float grown = *scale * growth;
      if (isfinite(grown)) *scale = grown;
      *tracker = 0;
    } else {
      *tracker = t;
    }
  }
  *inv_scale = 1.0f / *scale;
  *found_inf = 0.0f;
}

}  // namespace

void amp_cast_fp32_to_fp16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  cast_fp32_to_fp16_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  DLB_CUDA_CHECK(cudaGetLastError());
}
void amp_cast_fp16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  cast_fp16_to_fp32_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  DLB_CUDA_CHECK(cudaGetLastError());
}
void amp_cast_fp32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  cast_fp32_to_bf16_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  DLB_CUDA_CHECK(cudaGetLastError());
}
void amp_cast_bf16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  cast_bf16_to_fp32_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  DLB_CUDA_CHECK(cudaGetLastError());
}

void amp_cast_fp32_to_half_2d(const float* src, long ld, long rows, long cols, std::uint16_t* dst, bool bf16,
                              cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * std::size_t(cols);
  if (n == 0) return;
  if (bf16) cast_2d_kernel<true><<<blocks_for(n), kThreads, 0, s>>>(src, ld, rows, cols, dst);
  else cast_2d_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(src, ld, rows, cols, dst);
  DLB_CUDA_CHECK(cudaGetLastError());
}

void amp_unscale_check(float* g, std::size_t n, const float* inv_scale, float* found_inf, cudaStream_t s) {
  if (n == 0) return;
  unscale_check_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, n, inv_scale, found_inf);
  DLB_CUDA_CHECK(cudaGetLastError());
}

void amp_unscale_check_multi(float* const* ptrs, const std::size_t* sizes, int count, const float* inv_scale,
                             float* found_inf, cudaStream_t s) {
  if (count <= 0) return;
  // 64 blocks per tensor: enough for the seeds' largest gradient (~400k floats in fc1 of the
  // ConvNet) to stream at full bandwidth, few enough for the many tiny bias tensors.
  const dim3 grid(64, static_cast<unsigned>(count));
  unscale_check_multi_kernel<<<grid, kThreads, 0, s>>>(ptrs, sizes, inv_scale, found_inf);
  DLB_CUDA_CHECK(cudaGetLastError());
}

void amp_update_scale(float* scale, float* inv_scale, int* growth_tracker, float* found_inf, float growth_factor,
                      float backoff_factor, int growth_interval, cudaStream_t s) {
  update_scale_kernel<<<1, 1, 0, s>>>(scale, inv_scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                      growth_interval);
  DLB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dlb::cuda
