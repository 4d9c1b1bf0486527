// nn.MaxPool2d(k): window k, stride k, over NCHW; the argmax of forward kept for backward. Fused
// with the ReLU before it (and a conv before that) in plan steps (models/cpu_steps.h).
#pragma once
#include <cstdint>
#include <vector>

#include "models/layer.h"

namespace dlb::models {

class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int k) : k(k) {}
  Op op() const override { return Op::max_pool2d; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<MaxPool2d>(*this); }
  Shape out_shape(Shapes in) const override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  int k;

 private:
  std::vector<std::int32_t> arg_;
};

}  // namespace dlb::models
