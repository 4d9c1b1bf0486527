// The key block of an attention in-projection's bias ([q | k | v], each a third): q.(k + b_k) adds
// q.b_k to every score of a query row, which softmax ignores, so b_k's gradient is zero but for
// rounding. The CPU tests check that (test_seq_models.cpp, test_gpt2.cpp); the GPU step tests
// compare weights after Adam steps without that block (gpu_trainer_check.h says why).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "models/layer.h"

namespace attnbias {

// True for in_proj_bias (nn.MultiheadAttention) and attn.c_attn.bias (GPT-2), element i in [E, 2E).
inline bool is_key_bias_block(const std::string& name, std::size_t size, std::size_t i) {
  auto ends = [&](const char* suffix) {
    const std::string x(suffix);
    return name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
  };
  return (ends("in_proj_bias") || ends("attn.c_attn.bias")) && i >= size / 3 && i < 2 * size / 3;
}

// |grad of the key block| / |grad of the whole bias| (L2), or -1 for a parameter that is no such bias.
inline double key_block_grad_share(const dlb::models::Param& p) {
  double kb = 0, all = 0;
  bool any = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double g = p.grad[i];
    all += g * g;
    if (is_key_bias_block(p.name, p.size(), i)) kb += g * g, any = true;
  }
  return any && all > 0 ? std::sqrt(kb / all) : -1;
}

// Expects every such bias's key-block share under `bound`; returns how many there were.
inline int expect_key_bias_grads_vanish(const std::vector<dlb::models::Param*>& params, double bound = 1e-4) {
  int seen = 0;
  for (const dlb::models::Param* p : params) {
    const double share = key_block_grad_share(*p);
    if (share < 0) continue;
    ++seen;
    EXPECT_LT(share, bound) << p->name;
  }
  return seen;
}

}  // namespace attnbias
