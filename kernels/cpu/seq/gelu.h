// GELU with the tanh approximation (nn.GELU(approximate='tanh'), GPT-2's), fp32, forward and backward:
//   y = x/2 (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   dx = dy (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2))
// Napkin math per element: forward ~20 flops (one exp inside tanh), 8 bytes; backward ~30 flops,
// 12 bytes: memory-bound beyond a few MB.
#pragma once
#include <cstddef>

namespace dlb::cpu::seq {

void gelu_forward(const float* x, float* y, std::size_t n);
void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n);  // dx may alias dy

void gelu_forward_ref(const double* x, double* y, std::size_t n);
void gelu_backward_ref(const double* x, const double* dy, double* dx, std::size_t n);

}  // namespace dlb::cpu::seq
