// Shape, Param, the Op table and the init fill (see layer.h).
#include "models/layer.h"

#include <stdexcept>

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

void add_into(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace dlb::models
