// Residual add: y = a + b over two inputs of one shape (a Transformer block's x + sublayer(x)).
// Backward hands dy to both inputs; where one tensor feeds both branches the executor sums them.
#pragma once
#include "models/layer.h"

namespace dlb::models {

class Add final : public Layer {
 public:
  Op op() const override { return Op::add; }
  int inputs() const override { return 2; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Add>(*this); }
  Shape out_shape(Shapes in) const override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
};

}  // namespace dlb::models
