// GPT-2's learned positions (its `wpe`, an nn.Embedding(max_len, C) indexed by arange(T)) added to
// its input: y[b, t, :] = x[b, t, :] + wpe[t, :] for x [n, T, C], T <= max_len (a longer sequence is
// bad input). Backward: dx = dy, wpe.grad[t] += sum over the batch of dy[b, t]. Init N(0, 0.02) as
// GPT-2's (a checkpoint overwrites it). Memory-bound: 3 n T C floats each way.
#pragma once
#include <string>

#include "models/layer.h"

namespace dlb::models {

class PositionEmbedding final : public Layer {
 public:
  PositionEmbedding(std::string name, int max_len, int C);
  Op op() const override { return Op::position_embedding; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<PositionEmbedding>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {&weight}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return double(in[0].size()); }
  int max_len, C;
  Param weight;  // [max_len, C]
};

}  // namespace dlb::models
