// ReLU, Sigmoid and GELU (see activations.h): each reference beside its fast path.
#include "models/layers/activations.h"

#include <cmath>

#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/seq/gelu.h"

namespace dlb::models {

void ReLU::forward_ref(const Fwd<double>& a) {
  for (std::size_t i = 0; i < a.in[0].size(); ++i) a.y[i] = a.x()[i] > 0 ? a.x()[i] : 0.0;
}
void ReLU::backward_ref(const Bwd<double>& a) {
  if (a.dx())
    for (std::size_t i = 0; i < a.in[0].size(); ++i) a.dx()[i] = a.x()[i] > 0 ? a.dy[i] : 0.0;
}
void ReLU::forward(const Fwd<float>& a) { cpu::relu_forward(a.x(), a.y, a.in[0].size()); }
void ReLU::backward(const Bwd<float>& a) {
  if (a.dx()) cpu::relu_backward(a.y, a.dy, a.dx(), a.in[0].size());
}

void Sigmoid::forward_ref(const Fwd<double>& a) {
  for (std::size_t i = 0; i < a.in[0].size(); ++i) a.y[i] = 1.0 / (1.0 + std::exp(-a.x()[i]));
}
void Sigmoid::backward_ref(const Bwd<double>& a) {
  if (a.dx())
    for (std::size_t i = 0; i < a.in[0].size(); ++i) a.dx()[i] = a.dy[i] * a.y[i] * (1.0 - a.y[i]);
}
void Sigmoid::forward(const Fwd<float>& a) { cpu::sigmoid_forward(a.x(), a.y, a.in[0].size()); }
void Sigmoid::backward(const Bwd<float>& a) {
  if (a.dx()) cpu::sigmoid_backward(a.y, a.dy, a.dx(), a.in[0].size());
}

// GELU reads its input in backward (the tanh is recomputed: cheaper than keeping it).
void GELU::forward(const Fwd<float>& a) { cpu::seq::gelu_forward(a.x(), a.y, a.in[0].size()); }
void GELU::backward(const Bwd<float>& a) {
  if (a.dx()) cpu::seq::gelu_backward(a.x(), a.dy, a.dx(), a.in[0].size());
}
void GELU::forward_ref(const Fwd<double>& a) { cpu::seq::gelu_forward_ref(a.x(), a.y, a.in[0].size()); }
void GELU::backward_ref(const Bwd<double>& a) {
  if (a.dx()) cpu::seq::gelu_backward_ref(a.x(), a.dy, a.dx(), a.in[0].size());
}

}  // namespace dlb::models
