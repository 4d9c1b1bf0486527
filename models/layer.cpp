// Shape, Param, the Op table and the init fill (see layer.h).
#include "models/layer.h"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace dlb::models {

Shape::Shape(std::initializer_list<int> dims) {
  if (dims.size() > std::size_t(kMaxRank)) throw std::invalid_argument("Shape: rank above 6");
  for (int d : dims) d_[std::size_t(rank_++)] = d;
}

std::size_t Shape::size() const {
  std::size_t s = 1;
  for (int i = 0; i < rank_; ++i) s *= std::size_t(d_[std::size_t(i)]);
  return s;
}

std::size_t Shape::per_item() const { return rank_ ? size() / std::size_t(d_[0]) : 1; }

Shape Shape::with_batch(int n) const {
  Shape s = *this;
  if (s.rank_ == 0) s.rank_ = 1;
  s.d_[0] = n;
  return s;
}

Shape Shape::appended(int d) const {
  if (rank_ >= kMaxRank) throw std::invalid_argument("Shape: rank above 6");
  Shape s = *this;
  s.d_[std::size_t(s.rank_++)] = d;
  return s;
}

Shape Shape::without(int axis) const {
  if (axis < 0 || axis >= rank_) throw std::invalid_argument("Shape: no dimension " + std::to_string(axis));
  Shape s;
  for (int i = 0; i < rank_; ++i)
    if (i != axis) s.d_[std::size_t(s.rank_++)] = d_[std::size_t(i)];
  return s;
}

std::string Shape::str() const {
  std::string s;
  for (int i = 0; i < rank_; ++i) s += (i ? "x" : "") + std::to_string(d_[std::size_t(i)]);
  return s;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (d_[std::size_t(i)] != o.d_[std::size_t(i)]) return false;
  return true;
}

void Param::resize(std::vector<int> s) {
  shape = std::move(s);
  std::size_t n = 1;
  for (int d : shape) n *= std::size_t(d);
  value.assign(n, 0.f);
  grad.assign(n, 0.f);
  ref_value.assign(n, 0.0);
  ref_grad.assign(n, 0.0);
}

const OpInfo& op_info(Op op) {
  static const OpInfo table[] = {
      {Op::conv2d, "Conv2d", "conv2d", "conv", false},
      {Op::conv_transpose2d, "ConvTranspose2d", "conv_transpose2d", "convtranspose", false},
      {Op::linear, "Linear", "linear", "linear", false},
      {Op::relu, "ReLU", "relu", "relu", true},
      {Op::sigmoid, "Sigmoid", "sigmoid", "sigmoid", false},
      {Op::max_pool2d, "MaxPool2d", "max_pool2d", "pool", true},
      {Op::flatten, "Flatten", "flatten", "flatten", true},
      {Op::add, "Add", "add", "add", false},
      {Op::embedding, "Embedding", "embedding", "embedding", false},
      {Op::rnn_tanh, "RNN", "rnn_tanh", "rnn", false},
      {Op::lstm, "LSTM", "lstm", "lstm", false},
      {Op::select_step, "Select", "select", "select", true},
      {Op::layer_norm, "LayerNorm", "layer_norm", "norm", false},
      {Op::dropout, "Dropout", "dropout", "dropout", false},
      {Op::positional_encoding, "PositionalEncoding", "add", "posenc", false},
      {Op::multihead_attention, "MultiheadAttention", "scaled_dot_product_attention", "attn", false},
      {Op::gelu, "GELU", "gelu", "gelu", false},
      {Op::position_embedding, "PositionEmbedding", "add", "wpe", false},
      {Op::lm_head, "TiedLMHead", "linear", "lm_head", false},
      {Op::custom, "Custom", "custom", "custom", false},
  };
  for (const OpInfo& i : table)
    if (i.op == op) return i;
  throw std::logic_error("op_info: an Op without a row");
}

void fill_uniform_bound(float* p, std::size_t n, float bound, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = double(z >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    p[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

void fill_normal(float* p, std::size_t n, float stddev, std::uint64_t seed) {
  // Pairs of uniforms from fill_uniform_bound's stream (u in (-1, 1), folded to (0, 1]).
  std::vector<float> u(n + (n & 1));
  fill_uniform_bound(u.data(), u.size(), 1.f, seed);
  for (std::size_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - std::abs(double(u[i])) * 0.999999, u2 = 0.5 * (double(u[i + 1]) + 1.0);
    const double r = std::sqrt(-2.0 * std::log(u1)) * stddev, t = 6.283185307179586 * u2;
    p[i] = float(r * std::cos(t));
    if (i + 1 < n) p[i + 1] = float(r * std::sin(t));
  }
}

void add_into(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace dlb::models
