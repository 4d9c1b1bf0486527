// PositionEmbedding (see position_embedding.h): one loop over T for the fp32 path and the reference.
#include "models/layers/position_embedding.h"

#include "kernels/common/errors.h"

namespace dlb::models {

namespace {

template <class T>
void add_positions(const T* x, const T* w, T* y, int n, int len, int C) {
  for (int b = 0; b < n; ++b)
    for (int t = 0; t < len; ++t) {
      const std::size_t o = (std::size_t(b) * len + t) * C;
      for (int c = 0; c < C; ++c) y[o + c] = x[o + c] + w[std::size_t(t) * C + c];
    }
}

// dw[t] += sum_b dy[b, t] (batch outermost: the same order on every run); dx = dy.
template <class T>
void positions_backward(const T* dy, T* dw, T* dx, int n, int len, int C) {
  for (int b = 0; b < n; ++b)
    for (int t = 0; t < len; ++t) {
      const std::size_t o = (std::size_t(b) * len + t) * C;
      for (int c = 0; c < C; ++c) dw[std::size_t(t) * C + c] += dy[o + c];
    }
  if (dx)
    for (std::size_t i = 0, e = std::size_t(n) * len * C; i < e; ++i) dx[i] = dy[i];
}

}  // namespace

PositionEmbedding::PositionEmbedding(std::string name, int max_len, int C) : max_len(max_len), C(C) {
  if (max_len <= 0 || C <= 0) throw UsageError(name + ": length and channels must be positive");
  weight.name = name + ".weight";
  weight.resize({max_len, C});
}

Shape PositionEmbedding::out_shape(Shapes in) const {
  const Shape& s = in[0];
  if (s.rank() != 3 || s[2] != C)
    throw InputError(weight.name + ": input " + s.str() + ", wants [n, seq, " + std::to_string(C) + "]");
  if (s[1] > max_len)
    throw InputError(weight.name + ": sequence length " + std::to_string(s[1]) + " over the " +
                     std::to_string(max_len) + " positions");
  return s;
}

void PositionEmbedding::init(std::uint64_t seed) { fill_normal(weight.value.data(), weight.size(), 0.02f, seed); }

void PositionEmbedding::forward(const Fwd<float>& a) {
  add_positions(a.x(), weight.value.data(), a.y, a.in[0].n(), a.in[0][1], C);
}
void PositionEmbedding::backward(const Bwd<float>& a) {
  positions_backward(a.dy, weight.grad.data(), a.dx(), a.in[0].n(), a.in[0][1], C);
}
void PositionEmbedding::forward_ref(const Fwd<double>& a) {
  add_positions(a.x(), weight.ref_value.data(), a.y, a.in[0].n(), a.in[0][1], C);
}
void PositionEmbedding::backward_ref(const Bwd<double>& a) {
  positions_backward(a.dy, weight.ref_grad.data(), a.dx(), a.in[0].n(), a.in[0][1], C);
}

}  // namespace dlb::models
