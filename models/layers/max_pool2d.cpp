// MaxPool2d (see max_pool2d.h): fp64 reference first, then the fp32 path.
#include "models/layers/max_pool2d.h"

#include <algorithm>

#include "kernels/common/errors.h"
#include "kernels/cpu/nn_ops.h"

namespace dlb::models {

Shape MaxPool2d::out_shape(Shapes ins) const {
  const Shape& in = ins[0];
  if (in.rank() != 4 || in.h() < k || in.w() < k)
    throw InputError("MaxPool2d(" + std::to_string(k) + "): input " + in.str() + " too small");
  return {in.n(), in.c(), in.h() / k, in.w() / k};
}

void MaxPool2d::forward_ref(const Fwd<double>& a) {
  const Shape& in = a.in[0];
  const Shape o = out_shape(in);
  const double* x = a.x();
  for (long plane = 0; plane < long(in.n()) * in.c(); ++plane)
    for (int i = 0; i < o.h(); ++i)
      for (int j = 0; j < o.w(); ++j) {
        double best = x[(plane * in.h() + i * k) * in.w() + j * k];
        for (int r = 0; r < k; ++r)
          for (int s = 0; s < k; ++s) best = std::max(best, x[(plane * in.h() + i * k + r) * in.w() + j * k + s]);
        a.y[(plane * o.h() + i) * o.w() + j] = best;
      }
}

void MaxPool2d::backward_ref(const Bwd<double>& a) {
  double* dx = a.dx();
  if (!dx) return;
  const Shape& in = a.in[0];
  const Shape o = out_shape(in);
  const double* x = a.x();
  std::fill(dx, dx + in.size(), 0.0);
  for (long plane = 0; plane < long(in.n()) * in.c(); ++plane)
    for (int i = 0; i < o.h(); ++i)
      for (int j = 0; j < o.w(); ++j) {
        long bi = (plane * in.h() + i * k) * in.w() + j * k;
        for (int r = 0; r < k; ++r)
          for (int s = 0; s < k; ++s) {
            const long idx = (plane * in.h() + i * k + r) * in.w() + j * k + s;
            if (x[idx] > x[bi]) bi = idx;
          }
        dx[bi] += a.dy[(plane * o.h() + i) * o.w() + j];
      }
}

void MaxPool2d::forward(const Fwd<float>& a) {
  const Shape& in = a.in[0];
  arg_.resize(out_shape(in).size());
  cpu::maxpool2d_forward(a.x(), a.y, arg_.data(), in.n(), in.c(), in.h(), in.w(), k);
}

void MaxPool2d::backward(const Bwd<float>& a) {
  if (a.dx()) cpu::maxpool2d_backward(a.dy, arg_.data(), a.dx(), a.in[0].size(), out_shape(a.in[0]).size());
}

}  // namespace dlb::models
