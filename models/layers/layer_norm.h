// nn.LayerNorm(C): over the last dimension (rows of C), eps 1e-5, weight (ones) and bias (zeros);
// kernels/cpu/seq/layernorm.h, whose mean and rstd per row are kept from forward to backward.
#pragma once
#include <string>

#include "models/layer.h"

namespace dlb::models {

class LayerNorm final : public Layer {
 public:
  LayerNorm(std::string name, int C);
  Op op() const override { return Op::layer_norm; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<LayerNorm>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return 8.0 * double(in[0].size()); }
  int C;
  Param weight, bias;

 private:
  std::vector<float> mean_, rstd_, dw_, dx_;
};

}  // namespace dlb::models
