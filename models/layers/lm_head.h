// GPT-2's LM head tied to its token embedding: logits = x wte[:V]^T over the last dimension (x [n, T,
// C] -> [n, T, V]), no bias, reading the Embedding's weight [Vp, C] (a borrowed parameter: its
// gradient is the sum of both uses). Only the V real rows are read: llm.c pads the vocabulary to Vp
// for its kernels, and the padded logits take no part in the loss (their rows stay zero), so the
// logits of the padded columns are zero and left out. OpenBLAS sgemm; an fp64 reference.
// Napkin math, gpt2-124m at B 4 T 64: 2 * 256 * 768 * 50257 = 19.8 GFLOP forward, 38% of the model's.
#pragma once
#include "models/layers/embedding.h"

namespace dlb::models {

class TiedLMHead final : public Layer {
 public:
  TiedLMHead(Embedding* wte, int vocab);  // vocab <= wte's rows
  Op op() const override { return Op::lm_head; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<TiedLMHead>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {w_}; }
  std::vector<Param**> borrowed() override { return {&w_}; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return 2.0 * double(in[0].size()) * vocab; }
  Param& weight() { return *w_; }  // wte's [Vp, C]; rows [0, vocab) are read
  int vocab, C;

 private:
  Param* w_;
};

}  // namespace dlb::models
