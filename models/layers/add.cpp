// Add (see add.h): the fp64 reference and the fp32 path, the same loops over T.
#include "models/layers/add.h"

#include <algorithm>

#include "kernels/common/errors.h"

namespace dlb::models {

namespace {
template <class T>
void add_fwd(const Fwd<T>& a) {
  const T *x0 = a.x(0), *x1 = a.x(1);
  for (std::size_t i = 0, n = a.in[0].size(); i < n; ++i) a.y[i] = x0[i] + x1[i];
}
template <class T>
void add_bwd(const Bwd<T>& a) {
  const std::size_t n = a.in[0].size();
  for (int k = 0; k < 2; ++k)
    if (a.dx(k)) std::copy(a.dy, a.dy + n, a.dx(k));
}
}  // namespace

Shape Add::out_shape(Shapes in) const {
  if (in.count != 2 || in[0] != in[1])
    throw InputError("Add: needs two inputs of one shape, got " + in[0].str() + (in.count > 1 ? " and " + in[1].str() : ""));
  return in[0];
}

void Add::forward_ref(const Fwd<double>& a) { add_fwd(a); }
void Add::backward_ref(const Bwd<double>& a) { add_bwd(a); }
void Add::forward(const Fwd<float>& a) { add_fwd(a); }
void Add::backward(const Bwd<float>& a) { add_bwd(a); }

}  // namespace dlb::models
