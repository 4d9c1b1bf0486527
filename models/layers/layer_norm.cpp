// LayerNorm (see layer_norm.h) over the row kernels and their fp64 references.
#include "models/layers/layer_norm.h"

#include <algorithm>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/layernorm.h"

namespace dlb::models {

LayerNorm::LayerNorm(std::string name, int C) : C(C) {
  if (C <= 0) throw UsageError(name + ": normalized size must be positive");
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({C});
  bias.resize({C});
  init(0);
}

void LayerNorm::init(std::uint64_t) {
  std::fill(weight.value.begin(), weight.value.end(), 1.f);
  std::fill(bias.value.begin(), bias.value.end(), 0.f);
}

Shape LayerNorm::out_shape(Shapes in) const {
  if (in[0].last() != C)
    throw InputError(weight.name + ": normalizes " + std::to_string(C) + " features, got " + in[0].str());
  return in[0];
}

void LayerNorm::forward(const Fwd<float>& a) {
  const long rows = long(a.in[0].size() / std::size_t(C));
  mean_.resize(std::size_t(rows)), rstd_.resize(std::size_t(rows));
  cpu::seq::layernorm_forward(a.x(), weight.value.data(), bias.value.data(), a.y, mean_.data(), rstd_.data(), rows, C);
}

void LayerNorm::backward(const Bwd<float>& a) {
  const long rows = long(a.in[0].size() / std::size_t(C));
  dw_.resize(2 * std::size_t(C));
  float* dx = a.dx();
  if (!dx) dx_.resize(a.in[0].size()), dx = dx_.data();  // the kernel writes dx always
  cpu::seq::layernorm_backward(a.dy, a.x(), weight.value.data(), mean_.data(), rstd_.data(), dx, dw_.data(),
                               dw_.data() + C, rows, C);
  add_into(weight.grad.data(), dw_.data(), std::size_t(C));
  add_into(bias.grad.data(), dw_.data() + C, std::size_t(C));
}

void LayerNorm::forward_ref(const Fwd<double>& a) {
  const long rows = long(a.in[0].size() / std::size_t(C));
  cpu::seq::layernorm_forward_ref(a.x(), weight.ref_value.data(), bias.ref_value.data(), a.y, rows, C);
}

void LayerNorm::backward_ref(const Bwd<double>& a) {
  const long rows = long(a.in[0].size() / std::size_t(C));
  std::vector<double> dw(std::size_t(2 * C)), dx(a.dx() ? 0 : a.in[0].size());
  cpu::seq::layernorm_backward_ref(a.dy, a.x(), weight.ref_value.data(), a.dx() ? a.dx() : dx.data(), dw.data(),
                                   dw.data() + C, rows, C);
  for (int c = 0; c < C; ++c) weight.ref_grad[std::size_t(c)] += dw[std::size_t(c)], bias.ref_grad[std::size_t(c)] += dw[std::size_t(C + c)];
}

}  // namespace dlb::models
