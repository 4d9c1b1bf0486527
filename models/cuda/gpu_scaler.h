// GradScaler's device side for the CUDA trainers (gpu_trainer.cu, gpu_seq_trainer.cu): fp16 with
// dynamic loss scaling, PyTorch's semantics (models/amp.h GradScalerConfig: 2^16, x2 per 2000 finite
// steps, x0.5 and the step skipped on inf/NaN), with no host sync per step (a CUDA graph captures
// it). The state is one device buffer [scale, 1/scale, growth tracker (int bits), found_inf]; a
// training step makes these calls on the trainer's stream, in order:
//   scale()        the loss's seed gradient is multiplied by *scale() (a device float)
//   unscale(g, n)  after backward: g *= 1/scale over the flat fp32 gradient buffer and any inf/NaN
//                  noted in found_inf, one fused pass (kernels/cuda/amp_kernels.h amp_unscale_check)
//   skip()         the optimizer kernels' flag (sgd_momentum, increment + adam, adamw_step): no
//                  update, and no step count, when found_inf
//   update()       after the optimizer: backoff or growth, found_inf cleared
// clear() ends a gradient-only call (no optimizer step follows): found_inf cleared, the scale kept.
// Disabled (not fp16, or the config's enabled false): scale() and skip() null, the rest no-ops.
// Ran on an H100 (2026-11-27): the image, sequence and GPT-2 scaler tests pass.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_util.h"
#include "models/amp.h"

namespace dlb::models {

class GpuGradScaler {
 public:
  GpuGradScaler() = default;  // disabled, nothing allocated (assign the real one once the model is on the device)
  GpuGradScaler(bool enabled, const GradScalerConfig& c, cudaStream_t s);

  bool enabled() const { return on_; }
  const float* scale() const { return on_ ? buf_.data() : nullptr; }
  const float* skip() const { return on_ ? buf_.data() + 3 : nullptr; }
  void unscale(float* g, std::size_t n) const;
  void update() const;
  void clear() const;
  float read_scale() const;  // waits for the stream; 1 when disabled

 private:
  bool on_ = false;
  GradScalerConfig c_;
  cudaStream_t s_ = nullptr;
  cuda::DeviceBuffer<float> buf_;
};

}  // namespace dlb::models
