// Device helpers shared by the sequence kernels in kernels/cuda/seq/ (only): launch sizes, fp32 /
// bf16 loads and stores (fp32 arithmetic, one rounding on store), warp and block reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda::seq {

constexpr int kThreads = 256;
inline int grid_for(std::size_t n, int threads = kThreads) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < (1u << 30) ? (b > 0 ? b : 1) : (1u << 30));
}
inline void check_launch() { DLB_CUDA_CHECK(cudaGetLastError()); }

__device__ __forceinline__ float ldf(const float* p, std::size_t i) { return p[i]; }
__device__ __forceinline__ float ldf(const __nv_bfloat16* p, std::size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void stf(float* p, std::size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void stf(__nv_bfloat16* p, std::size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. The
// fixed tree makes the sum's bits independent of timing. `sh` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // sh may still be read by a previous call
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : 0.f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* sh) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : -FLT_MAX;
  return warp_max(v);
}

}  // namespace dlb::cuda::seq
