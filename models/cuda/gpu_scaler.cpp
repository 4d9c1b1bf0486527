// GpuGradScaler (see gpu_scaler.h): the device buffer and the amp kernels' calls. Ran on an H100 (2026-11-27).
#include "models/cuda/gpu_scaler.h"

#include "kernels/cuda/amp_kernels.h"

namespace dlb::models {

GpuGradScaler::GpuGradScaler(bool enabled, const GradScalerConfig& c, cudaStream_t s)
    : on_(enabled), c_(c), s_(s), buf_(enabled ? 4 : 0) {
  if (!on_) return;
  const float init[4] = {c.init_scale, 1.0f / c.init_scale, 0.0f, 0.0f};  // tracker 0: the int 0 has float 0's bits
  buf_.upload(init, 4, s_);
}

void GpuGradScaler::unscale(float* g, std::size_t n) const {
  if (on_) cuda::amp_unscale_check(g, n, buf_.data() + 1, buf_.data() + 3, s_);
}

void GpuGradScaler::update() const {
  if (on_)
    cuda::amp_update_scale(buf_.data(), buf_.data() + 1, reinterpret_cast<int*>(buf_.data() + 2), buf_.data() + 3,
                           c_.growth_factor, c_.backoff_factor, c_.growth_interval, s_);
}

void GpuGradScaler::clear() const {
  if (on_) DLB_CUDA_CHECK(cudaMemsetAsync(buf_.data() + 3, 0, sizeof(float), s_));
}

float GpuGradScaler::read_scale() const {
  if (!on_) return 1.0f;
  float v = 1.0f;
  buf_.download(&v, 1, s_);
  return v;
}

}  // namespace dlb::models
