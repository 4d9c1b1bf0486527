// nn.Dropout(p): in training, element i is zeroed when its Philox uniform is below p and the rest
// scaled by 1/(1-p) (kernels/cpu/seq/dropout.h: the mask is a pure function of (seed, offset + i),
// so backward regenerates it and the GPU draws the same one); in evaluation, the identity. The mask
// is keyed by the layer's stream (a number the model gives each Dropout) and the training step
// (Layer::set_step): the same step gives the same mask in the fp32 path and the reference.
#pragma once
#include <cstdint>

#include "models/layer.h"

namespace dlb::models {

// The Philox key and first element of a random draw by stream and step (Dropout, attention dropout):
// each step's draws start 2^40 elements past the last step's.
struct DropoutKey {
  std::uint64_t seed, offset;
};
DropoutKey dropout_key(std::uint64_t stream, std::uint64_t step);

class Dropout final : public Layer {
 public:
  Dropout(float p, std::uint64_t stream);
  Op op() const override { return Op::dropout; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Dropout>(*this); }
  Shape out_shape(Shapes in) const override { return in[0]; }
  void set_step(bool training_, std::uint64_t step_) override { training = training_, step = step_; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  bool active() const { return training && p > 0.f; }
  float p;
  std::uint64_t stream;
  bool training = true;
  std::uint64_t step = 0;
};

}  // namespace dlb::models
