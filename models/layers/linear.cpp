// Linear (see linear.h): fp64 reference first, then the fp32 path.
#include "models/layers/linear.h"

#include <cmath>

#include "kernels/common/errors.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/sgemm.h"

namespace dlb::models {

Linear::Linear(std::string name, int in_f, int out_f) : in_f(in_f), out_f(out_f) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({out_f, in_f});
  bias.resize({out_f});
}

Shape Linear::out_shape(Shapes ins) const {
  const Shape& in = ins[0];
  if (in.rank() < 2 || in.last() != in_f)
    throw InputError(weight.name + ": expects " + std::to_string(in_f) + " input features, got " + in.str());
  Shape o = in;
  o[in.rank() - 1] = out_f;
  return o;
}

void Linear::init(std::uint64_t seed) {
  const float bound = 1.f / std::sqrt(float(in_f));
  fill_uniform_bound(weight.value.data(), weight.size(), xavier ? std::sqrt(6.f / float(in_f + out_f)) : bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void Linear::forward_ref(const Fwd<double>& a) {
  const int m = rows(a.in[0]);
  for (int n = 0; n < m; ++n)
    for (int o = 0; o < out_f; ++o) {
      double acc = bias.ref_value[o];
      for (int i = 0; i < in_f; ++i) acc += a.x()[std::size_t(n) * in_f + i] * weight.ref_value[std::size_t(o) * in_f + i];
      a.y[std::size_t(n) * out_f + o] = acc;
    }
}

void Linear::backward_ref(const Bwd<double>& a) {
  const int m = rows(a.in[0]);
  for (int n = 0; n < m; ++n)
    for (int o = 0; o < out_f; ++o) {
      const double g = a.dy[std::size_t(n) * out_f + o];
      bias.ref_grad[o] += g;
      for (int i = 0; i < in_f; ++i) weight.ref_grad[std::size_t(o) * in_f + i] += g * a.x()[std::size_t(n) * in_f + i];
    }
  if (!a.dx()) return;
  for (int n = 0; n < m; ++n)
    for (int i = 0; i < in_f; ++i) {
      double acc = 0;
      for (int o = 0; o < out_f; ++o) acc += a.dy[std::size_t(n) * out_f + o] * weight.ref_value[std::size_t(o) * in_f + i];
      a.dx()[std::size_t(n) * in_f + i] = acc;
    }
}

void Linear::forward(const Fwd<float>& a) {
  // y[m, out] = x[m, in] W[out, in]^T + b (the bias inside the GEMM: no second pass over y)
  const int m = rows(a.in[0]);
  cpu::sgemm_nt(m, out_f, in_f, a.x(), weight.value.data(), a.y, bias.value.data());
}

void Linear::backward(const Bwd<float>& a) {
  // dW[out, in] += dy[m, out]^T x[m, in]; db += colsum(dy); dx[m, in] = dy[m, out] W[out, in]
  const int m = rows(a.in[0]);
  cpu::sgemm_tn_add(out_f, in_f, m, a.dy, a.x(), weight.grad.data());
  cpu::bias_rows_backward(a.dy, bias.grad.data(), m, out_f);
  if (a.dx())
    cpu::sgemm_nn(m, in_f, out_f, a.dy, weight.value.data(), a.dx());
}

}  // namespace dlb::models
