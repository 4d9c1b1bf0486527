// nn.Linear(in, out): y = x W^T + b over the last dimension (every leading one is a row: [n, in],
// [n, seq, in]), W [out, in]; OpenBLAS sgemm and an fp64 reference. Its bf16 variant is a plan step.
#pragma once
#include <string>

#include "models/layer.h"

namespace dlb::models {

class Linear final : public Layer {
 public:
  Linear(std::string name, int in_f, int out_f);
  Op op() const override { return Op::linear; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Linear>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return 2.0 * double(rows(in[0])) * in_f * out_f; }
  int rows(const Shape& in) const { return int(in.size() / std::size_t(in_f)); }
  int in_f, out_f;
  bool xavier = false;  // init the weight xavier_uniform (nn.Transformer's _reset_parameters) instead
  Param weight, bias;
};

}  // namespace dlb::models
