// PositionalEncoding (see positional_encoding.h): the table once in fp64, an add per element.
#include "models/layers/positional_encoding.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/errors.h"

namespace dlb::models {

PositionalEncoding::PositionalEncoding(int C, int max_len) : C(C), max_len(max_len) {
  if (C <= 0 || max_len <= 0) throw UsageError("PositionalEncoding: size and maximum length must be positive");
  pe.resize(std::size_t(max_len) * C);
  for (int t = 0; t < max_len; ++t)
    for (int i = 0; i < C; i += 2) {
      const double angle = t * std::exp(-std::log(10000.0) * i / C);
      pe[std::size_t(t) * C + i] = std::sin(angle);
      if (i + 1 < C) pe[std::size_t(t) * C + i + 1] = std::cos(angle);
    }
  pe32.assign(pe.begin(), pe.end());
}

Shape PositionalEncoding::out_shape(Shapes in) const {
  const Shape& x = in[0];
  if (x.rank() != 3 || x.last() != C)
    throw InputError("PositionalEncoding: expects [n, seq, " + std::to_string(C) + "], got " + x.str());
  if (x[1] > max_len)
    throw InputError("sequence length " + std::to_string(x[1]) + " is above the model's maximum " +
                     std::to_string(max_len));
  return x;
}

namespace {
template <class T, class P>
void add_pe(const T* x, T* y, const P* pe, int n, int T_, int C) {
  for (int b = 0; b < n; ++b)
    for (int t = 0; t < T_; ++t) {
      const std::size_t r = (std::size_t(b) * T_ + t) * C;
      for (int c = 0; c < C; ++c) y[r + c] = x[r + c] + T(pe[std::size_t(t) * C + c]);
    }
}
}  // namespace

void PositionalEncoding::forward(const Fwd<float>& a) { add_pe(a.x(), a.y, pe32.data(), a.in[0].n(), a.in[0][1], C); }
void PositionalEncoding::forward_ref(const Fwd<double>& a) {
  add_pe(a.x(), a.y, pe.data(), a.in[0].n(), a.in[0][1], C);
}
void PositionalEncoding::backward(const Bwd<float>& a) {
  if (a.dx()) std::copy_n(a.dy, a.in[0].size(), a.dx());
}
void PositionalEncoding::backward_ref(const Bwd<double>& a) {
  if (a.dx()) std::copy_n(a.dy, a.in[0].size(), a.dx());
}

}  // namespace dlb::models
