// Dropout (see dropout.h): the Philox kernels; the reference draws the same mask element by element.
#include "models/layers/dropout.h"

#include <algorithm>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/dropout.h"

namespace dlb::models {

DropoutKey dropout_key(std::uint64_t stream, std::uint64_t step) {
  return {0xD5A61266F0C9392CULL ^ (stream * 0x9E3779B97F4A7C15ULL), step << 40};
}

Dropout::Dropout(float p, std::uint64_t stream) : p(p), stream(stream) {
  if (!(p >= 0.f && p < 1.f)) throw UsageError("Dropout: p must be in [0, 1), got " + std::to_string(p));
}

void Dropout::forward(const Fwd<float>& a) {
  const std::size_t n = a.in[0].size();
  if (!active()) return void(std::copy_n(a.x(), n, a.y));
  const DropoutKey k = dropout_key(stream, step);
  cpu::seq::dropout_forward(a.x(), a.y, nullptr, n, p, k.seed, k.offset);
}

void Dropout::backward(const Bwd<float>& a) {
  const std::size_t n = a.in[0].size();
  if (!a.dx()) return;
  if (!active()) return void(std::copy_n(a.dy, n, a.dx()));
  const DropoutKey k = dropout_key(stream, step);
  cpu::seq::dropout_backward(a.dy, a.dx(), n, p, k.seed, k.offset);
}

namespace {
// mask * v / (1 - p) elementwise (the mask drawn by the reference).
void apply_ref(const double* v, double* out, std::size_t n, float p, const DropoutKey& k) {
  std::vector<std::uint8_t> mask(n);
  cpu::seq::dropout_mask_ref(mask.data(), n, p, k.seed, k.offset);
  const double scale = 1.0 / (1.0 - double(p));
  for (std::size_t i = 0; i < n; ++i) out[i] = mask[i] ? v[i] * scale : 0.0;
}
}  // namespace

void Dropout::forward_ref(const Fwd<double>& a) {
  const std::size_t n = a.in[0].size();
  if (!active()) return void(std::copy_n(a.x(), n, a.y));
  apply_ref(a.x(), a.y, n, p, dropout_key(stream, step));
}

void Dropout::backward_ref(const Bwd<double>& a) {
  const std::size_t n = a.in[0].size();
  if (!a.dx()) return;
  if (!active()) return void(std::copy_n(a.dy, n, a.dx()));
  apply_ref(a.dy, a.dx(), n, p, dropout_key(stream, step));
}

}  // namespace dlb::models
