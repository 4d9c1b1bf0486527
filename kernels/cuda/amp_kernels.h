// Mixed-precision kernels on the GPU: fp32 <-> fp16/bf16 casts (round to nearest even, the same bits
// as kernels/cpu/bf16_cast.h) and GradScaler's device side: one fused pass that unscales the
// gradients and notes any inf/NaN (PyTorch's _amp_foreach_non_finite_check_and_unscale_), and the
// scale update (_amp_update_scale_), so a training step never syncs with the host for the scaler.
// Half tensors are raw 16-bit patterns (std::uint16_t) so host code needs no CUDA half headers.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlb::cuda {

void amp_cast_fp32_to_fp16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t s = nullptr);
void amp_cast_fp16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n, cudaStream_t s = nullptr);
void amp_cast_fp32_to_bf16(const float* src, std::uint16_t* dst, std::size_t n, cudaStream_t s = nullptr);
void amp_cast_bf16_to_fp32(const std::uint16_t* src, float* dst, std::size_t n, cudaStream_t s = nullptr);

// dst[r * cols + c] = 16-bit (bf16 if `bf16`, else fp16) src[r * ld + c] for r < rows, c < cols:
// a strided fp32 matrix packed as 16-bit operands (gemm_f32's fp16/bf16 GEMMs).
void amp_cast_fp32_to_half_2d(const float* src, long ld, long rows, long cols, std::uint16_t* dst, bool bf16,
                              cudaStream_t s = nullptr);

// g[i] *= *inv_scale for i < n; *found_inf = 1.0f if any g[i] was inf/NaN (it is never cleared
// here: zero it once per step, then call this for every gradient tensor). inv_scale and found_inf
// are device pointers (one float each).
void amp_unscale_check(float* g, std::size_t n, const float* inv_scale, float* found_inf, cudaStream_t s = nullptr);

// Several gradient tensors in one launch: ptrs/sizes are DEVICE arrays of `count` entries.
void amp_unscale_check_multi(float* const* ptrs, const std::size_t* sizes, int count, const float* inv_scale,
                             float* found_inf, cudaStream_t s = nullptr);

// GradScaler.update() on the device (single thread): if *found_inf, scale *= backoff and the
// tracker resets; else the tracker grows and at growth_interval scale *= growth (if finite). Also
// writes *inv_scale = 1/scale for the next step and clears *found_inf.
void amp_update_scale(float* scale, float* inv_scale, int* growth_tracker, float* found_inf, float growth_factor,
                      float backoff_factor, int growth_interval, cudaStream_t s = nullptr);

}  // namespace dlb::cuda
