// AdamW (torch.optim.AdamW, its single-tensor formula), fp32, in place:
//   p *= 1 - lr * wd;  m += (1 - b1) (g - m);  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)       (t counts from 1)
// the bias corrections in fp64 as PyTorch's Python floats. Defaults are PyTorch's (lr 1e-3, betas
// 0.9 / 0.999, eps 1e-8, weight_decay 0.01); GPT-2 in llm.c uses lr 3e-4, wd 0 (or 0.1 on matrices).
// Napkin math per parameter: ~12 flops + a sqrt and a divide, 28 bytes (p, g, m, v read; p, m, v
// written): memory-bound, 124M parameters = 3.5 GB a step.
#pragma once
#include <cstddef>

namespace dlb::cpu::seq {

struct AdamW {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};

void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const AdamW& o, long step);
void adamw_step_ref(double* p, const double* g, double* m, double* v, std::size_t n, const AdamW& o, long step);

}  // namespace dlb::cpu::seq
