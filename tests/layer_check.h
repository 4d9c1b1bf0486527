// The layer gradient check shared by test_layers.cpp and test_seq_layers.cpp: a model's fp64
// reference gradients against central finite differences, and its fp32 step against the reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "models/net.h"

namespace layertest {

using namespace dlb;
using namespace dlb::models;

struct Check {
  double fd_err = 0;    // reference analytic vs finite differences (relative to the gradient's scale)
  double fast_err = 0;  // fast fp32 gradients vs the reference
  std::string fast_worst;  // the parameter with the largest fast_err
  double loss_err = 0;
  std::string worst;    // where fd_err was largest
};
inline double rel(double a, double b, double scale) { return std::abs(a - b) / std::max(scale, 1e-12); }

// A ReLU/max switching inside [-h, h] makes the two one-sided differences disagree: no derivative
// there, so the point is skipped (it happens rarely with random inputs in deep models).
inline bool kink(double lp, double lm, double l0, double h, double scale) {
  return std::abs((lp - l0) / h - (l0 - lm) / h) > 1e-3 * std::max(scale, 1e-12);
}

// Runs model `m` on a random batch of n and compares gradients three ways.
// h: the finite-difference step; 1e-6 by default, larger where gradients are tiny (deep sigmoid
// models), so that rounding in the loss does not swamp the difference.
// Cross-entropy labels: one per row of the output (per item, or per position of a sequence).
// `more`: the model's inputs after input 0 (token ids, initial states), which the check does not
// perturb; a model whose input 0 holds token ids takes it as more[0] and has no input gradient.
inline Check gradcheck(Model& m, int n, bool labels = false, std::uint64_t seed = 7, double h = 1e-6,
                       std::vector<const void*> more = {}) {
  m.init(seed);
  const Shape in = m.input_shape(n), out = m.output_shape(n);
  const bool tokens = m.integer_value(m.input_value(0));
  std::vector<float> x(tokens ? 0 : in.size()), target(out.size());
  fill_uniform(x.data(), x.size(), seed + 1);
  fill_uniform(target.data(), target.size(), seed + 2);
  std::vector<std::int32_t> lab(out.size() / std::size_t(out.last()));
  for (std::size_t i = 0; i < lab.size(); ++i) lab[i] = std::int32_t((i * 7 + 3) % std::size_t(out.last()));
  Batch b{x.data(), labels ? lab.data() : nullptr, labels ? nullptr : target.data(), n};
  if (!tokens) more.insert(more.begin(), x.data());
  if (more.size() > 1 || tokens) b.inputs = more.data();

  m.sync_ref();
  std::vector<double> x64(x.begin(), x.end()), dx;
  const double loss64 = m.forward_backward_ref(x64.data(), b, &dx);

  Check c;
  const double l0 = m.loss_ref(x64.data(), b);
  // Parameters: every entry of small tensors, a stride through big ones.
  for (Param* p : m.params()) {
    double scale = 0;
    for (double g : p->ref_grad) scale = std::max(scale, std::abs(g));
    const std::size_t step = std::max<std::size_t>(1, p->size() / 40);
    const std::vector<double> grad = p->ref_grad;
    for (std::size_t i = 0; i < p->size(); i += step) {
      const double keep = p->ref_value[i];
      p->ref_value[i] = keep + h;
      const double lp = m.loss_ref(x64.data(), b);
      p->ref_value[i] = keep - h;
      const double lm = m.loss_ref(x64.data(), b);
      p->ref_value[i] = keep;
      if (kink(lp, lm, l0, h, scale)) continue;
      const double e = rel((lp - lm) / (2 * h), grad[i], scale);
      if (e > c.fd_err) c.fd_err = e, c.worst = p->name + "[" + std::to_string(i) + "] scale " + std::to_string(scale);
    }
  }
  // Input gradient.
  double scale = 0;
  for (double g : dx) scale = std::max(scale, std::abs(g));
  const std::size_t step = std::max<std::size_t>(1, x64.size() / 60);
  for (std::size_t i = 0; i < x64.size(); i += step) {
    const double keep = x64[i];
    x64[i] = keep + h;
    const double lp = m.loss_ref(x64.data(), b);
    x64[i] = keep - h;
    const double lm = m.loss_ref(x64.data(), b);
    x64[i] = keep;
    if (kink(lp, lm, l0, h, scale)) continue;
    const double e = rel((lp - lm) / (2 * h), dx[i], scale);
    if (e > c.fd_err) c.fd_err = e, c.worst = "input[" + std::to_string(i) + "]";
  }
  // Fast path vs reference.
  m.zero_grad();
  const float loss32 = m.forward_backward(b);
  c.loss_err = std::abs(loss32 - loss64) / std::max(1e-12, std::abs(loss64));
  WorstError w;
  for (Param* p : m.params()) w.add(max_rel_err(p->grad.data(), p->ref_grad.data(), p->size()), p->name);
  c.fast_err = w.err, c.fast_worst = w.where;
  return c;
}

inline void expect_ok(const Check& c) {
  EXPECT_LT(c.fd_err, 1e-5) << "reference backward disagrees with finite differences at " << c.worst;
  EXPECT_LT(c.fast_err, 1e-4) << "fp32 fast path disagrees with the fp64 reference at " << c.fast_worst;
  EXPECT_LT(c.loss_err, 1e-5);
}

}  // namespace layertest
