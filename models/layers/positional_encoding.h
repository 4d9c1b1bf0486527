// The sinusoidal positional encoding of "Attention Is All You Need" added to its input:
// y[b, t, :] = x[b, t, :] + pe[t, :], pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(same),
// for t < max_len (a longer sequence is bad input). The seed's TransformerLM adds it to the token
// embedding (`embedding(src) + pos_encoding(src)`); it has no parameters and no dropout here.
#pragma once
#include <vector>

#include "models/layer.h"

namespace dlb::models {

class PositionalEncoding final : public Layer {
 public:
  PositionalEncoding(int C, int max_len);
  Op op() const override { return Op::positional_encoding; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<PositionalEncoding>(*this); }
  Shape out_shape(Shapes in) const override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  int C, max_len;
  std::vector<double> pe;  // [max_len, C]
  std::vector<float> pe32;
};

}  // namespace dlb::models
