// SelectStep (see select_step.h): a strided copy forward, a scatter into zeros backward.
#include "models/layers/select_step.h"

#include <algorithm>

#include "kernels/common/errors.h"

namespace dlb::models {

namespace {
// Where item b's selected row starts, in elements.
std::size_t row_of(const Shape& x, int t, bool seq_first, int b) {
  const int T = x[1], F = x.last(), step = t < 0 ? T + t : t;
  return (seq_first ? std::size_t(step) * x.n() + b : std::size_t(b) * T + step) * std::size_t(F);
}
template <class T>
void fwd(const Fwd<T>& a, int t, bool sf) {
  const Shape& x = a.in[0];
  for (int b = 0; b < x.n(); ++b) std::copy_n(a.x() + row_of(x, t, sf, b), x.last(), a.y + std::size_t(b) * x.last());
}
template <class T>
void bwd(const Bwd<T>& a, int t, bool sf) {
  if (!a.dx()) return;
  const Shape& x = a.in[0];
  std::fill_n(a.dx(), x.size(), T(0));
  for (int b = 0; b < x.n(); ++b) std::copy_n(a.dy + std::size_t(b) * x.last(), x.last(), a.dx() + row_of(x, t, sf, b));
}
}  // namespace

Shape SelectStep::out_shape(Shapes in) const {
  const Shape& x = in[0];
  if (x.rank() != 3) throw InputError("Select: expects [n, seq, features], got " + x.str());
  if (t >= x[1] || t < -x[1])
    throw InputError("Select: step " + std::to_string(t) + " outside a sequence of " + std::to_string(x[1]));
  return x.without(1);
}

void SelectStep::forward(const Fwd<float>& a) { fwd(a, t, seq_first); }
void SelectStep::backward(const Bwd<float>& a) { bwd(a, t, seq_first); }
void SelectStep::forward_ref(const Fwd<double>& a) { fwd(a, t, seq_first); }
void SelectStep::backward_ref(const Bwd<double>& a) { bwd(a, t, seq_first); }

}  // namespace dlb::models
