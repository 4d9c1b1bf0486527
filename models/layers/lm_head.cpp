// TiedLMHead (see lm_head.h): three sgemms, and their loops in fp64.
#include "models/layers/lm_head.h"

#include <cblas.h>

#include "kernels/common/errors.h"

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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, vocab, C, 1.f, a.x(), C, w_->value.data(), C, 0.f, a.y, vocab);
}

void TiedLMHead::backward(const Bwd<float>& a) {
  const int m = int(a.in[0].size() / std::size_t(C));
  // wte.grad[:V] += dy^T x; dx = dy wte[:V]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vocab, C, m, 1.f, a.dy, vocab, a.x(), C, 1.f, w_->grad.data(), C);
  if (a.dx())
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, C, vocab, 1.f, a.dy, vocab, w_->value.data(), C, 0.f,
                a.dx(), C);
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
