// torch.flatten(x, 1): [n, ...] -> [n, prod(...)]; the data is copied unchanged.
#pragma once
#include "models/layer.h"

namespace dlb::models {

class Flatten final : public Layer {
 public:
  Op op() const override { return Op::flatten; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Flatten>(*this); }
  Shape out_shape(Shapes in) const override { return {in[0].n(), int(in[0].per_item())}; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
};

}  // namespace dlb::models
