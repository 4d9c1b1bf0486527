// nn.Embedding(vocab, dim): token ids (an integer input of any shape [n, ...]) to rows of the weight
// [vocab, dim], y [n, ..., dim]; backward scatter-adds dy into the weight's gradient (kernels/cpu/seq/
// embedding.h, the same sums in the same order on any thread count). Init N(0, 1) as PyTorch's.
// A second Embedding may read the first one's weight (TransformerLM embeds src and tgt with one
// table): a borrowed parameter (Layer::borrowed), its gradient the sum of both uses.
#pragma once
#include <string>

#include "models/layer.h"

namespace dlb::models {

class Embedding final : public Layer {
 public:
  Embedding(std::string name, int vocab, int dim);
  explicit Embedding(Embedding* owner);  // reads owner's weight
  Op op() const override { return Op::embedding; }
  bool integer_input(int) const override { return true; }
  std::unique_ptr<Layer> clone() const override;
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {w_}; }
  std::vector<Param**> borrowed() override { return shared_ ? std::vector<Param**>{&w_} : std::vector<Param**>{}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  Param& weight() { return *w_; }
  int vocab, dim;

 private:
  Param own_;
  Param* w_;
  bool shared_ = false;
};

}  // namespace dlb::models
