// TiedLMHead (see lm_head.h): three sgemms, and their loops in fp64.
#include "models/layers/lm_head.h"

#include "kernels/common/errors.h"
#include "kernels/cpu/sgemm.h"

namespace dlb::models {

TiedLMHead::TiedLMHead(Embedding* wte, int vocab) : vocab(vocab), C(wte->dim), w_(&wte->weight()) {
  if (vocab <= 0 || vocab > wte->vocab)
    throw UsageError("lm_head: vocabulary " + std::to_string(vocab) + " outside 1.." + std::to_string(wte->vocab));
}

Shape TiedLMHead::out_shape(Shapes in) const {
  if (in[0].last() != C) throw InputError("lm_head: input " + in[0].str() + ", wants " + std::to_string(C) + " features");
  Shape s = in[0];
  s[s.rank() - 1] = vocab;
  return s;
}

void TiedLMHead::forward(const Fwd<float>& a) {
  const int m = int(a.in[0].size() / std::size_t(C));
  cpu::sgemm_nt(m, vocab, C, a.x(), w_->value.data(), a.y);
}

void TiedLMHead::backward(const Bwd<float>& a) {
  const int m = int(a.in[0].size() / std::size_t(C));
  // wte.grad[:V] += dy^T x; dx = dy wte[:V]
  cpu::sgemm_tn_add(vocab, C, m, a.dy, a.x(), w_->grad.data());
  if (a.dx()) cpu::sgemm_nn(m, C, vocab, a.dy, w_->value.data(), a.dx());
}

void TiedLMHead::forward_ref(const Fwd<double>& a) {
  const std::size_t m = a.in[0].size() / std::size_t(C);
  const double* w = w_->ref_value.data();
  for (std::size_t r = 0; r < m; ++r)
    for (int v = 0; v < vocab; ++v) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += a.x()[r * C + c] * w[std::size_t(v) * C + c];
      a.y[r * vocab + v] = s;
    }
}

void TiedLMHead::backward_ref(const Bwd<double>& a) {
  const std::size_t m = a.in[0].size() / std::size_t(C);
  const double* w = w_->ref_value.data();
  double* g = w_->ref_grad.data();
  for (std::size_t r = 0; r < m; ++r)
    for (int v = 0; v < vocab; ++v) {
      const double d = a.dy[r * vocab + v];
      for (int c = 0; c < C; ++c) g[std::size_t(v) * C + c] += d * a.x()[r * C + c];
    }
  if (a.dx())
    for (std::size_t r = 0; r < m; ++r)
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int v = 0; v < vocab; ++v) s += a.dy[r * vocab + v] * w[std::size_t(v) * C + c];
        a.dx()[r * C + c] = s;
      }
}

}  // namespace dlb::models
