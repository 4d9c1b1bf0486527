// One time step of a sequence: x [n, T, F] -> x[:, t, :] [n, F] (t < 0 counts from the end: -1 is
// the last step, `output[:, -1, :]`, which for a recurrent layer is its last hidden state hn).
// seq_first: x is stored time-major [T, n, F] (a sequence-first Recurrent's output, rnn.h).
#pragma once
#include "models/layer.h"

namespace dlb::models {

class SelectStep final : public Layer {
 public:
  explicit SelectStep(int t = -1, bool seq_first = false) : t(t), seq_first(seq_first) {}
  Op op() const override { return Op::select_step; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<SelectStep>(*this); }
  Shape out_shape(Shapes in) const override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  int t;
  bool seq_first;
};

}  // namespace dlb::models
