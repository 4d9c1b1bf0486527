// Losses (model.h) and optimizers (net.h) on the CPU.
#include "models/net.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/seq/adamw.h"
#include "kernels/cpu/seq/softmax.h"
#include "kernels/cpu/threads.h"

namespace dlb::models {

float loss_forward_backward(LossKind k, const float* out, const Batch& b, std::size_t out_size, int classes, float* d) {
  if (k == LossKind::cross_entropy) {
    if (!b.labels) throw UsageError("cross-entropy needs labels");
    const int rows = int(out_size / std::size_t(classes));  // a sample per row: per item, or per position
    for (int i = 0; i < rows; ++i)
      if (b.labels[i] < 0 || b.labels[i] >= classes)
        throw InputError("label " + std::to_string(b.labels[i]) + " outside [0, " + std::to_string(classes) + ")");
    // The fused classifier: vectorized, rows over the kernel threads, the loss summed in row order
    // (the same bits on any thread count). At gpt2-124m B 4 T 256 that is 1024 rows of 50257 classes.
    return cpu::seq::classifier_forward_backward(out, b.labels, rows, classes, classes, nullptr, d);
  }
  const float* t = b.target ? b.target : static_cast<const float*>(b.input(0));
  return cpu::mse_forward_backward(out, t, out_size, d);
}

double loss_forward_backward_ref(LossKind k, const double* out, const Batch& b, const double* x_ref,
                                 std::size_t out_size, int classes, double* d) {
  if (k == LossKind::cross_entropy) {
    double total = 0;
    const int rows = int(out_size / std::size_t(classes));
    for (int i = 0; i < rows; ++i) {
      const double* z = out + std::size_t(i) * classes;
      double mx = z[0];
      for (int j = 1; j < classes; ++j) mx = std::max(mx, z[j]);
      double s = 0;
      for (int j = 0; j < classes; ++j) s += std::exp(z[j] - mx);
      const double lse = mx + std::log(s);
      total += lse - z[b.labels[i]];
      if (d)
        for (int j = 0; j < classes; ++j)
          d[std::size_t(i) * classes + j] = (std::exp(z[j] - lse) - (j == b.labels[i] ? 1.0 : 0.0)) / rows;
    }
    return total / rows;
  }
  double s = 0;
  for (std::size_t i = 0; i < out_size; ++i) {
    const double t = b.target ? double(b.target[i]) : x_ref[i];
    const double e = out[i] - t;
    s += e * e;
    if (d) d[i] = 2.0 * e / double(out_size);
  }
  return s / double(out_size);
}

Optimizer::Optimizer(OptimizerConfig cfg, std::vector<Param*> params) : cfg_(std::move(cfg)), params_(std::move(params)) {
  if (cfg_.kind != "sgd" && cfg_.kind != "adam" && cfg_.kind != "adamw")
    throw UsageError("optimizer '" + cfg_.kind + "': expected sgd, adam or adamw");
  if (!(cfg_.lr > 0) || !std::isfinite(cfg_.lr)) throw UsageError("learning rate must be a positive number");
  for (Param* p : params_) {
    s1_.emplace_back(p->size(), 0.f);
    s2_.emplace_back(cfg_.kind != "sgd" ? p->size() : 0, 0.f);
  }
}

void Optimizer::copy_state_from(const Optimizer& o) {
  if (o.cfg_.kind != cfg_.kind || o.params_.size() != params_.size())
    throw UsageError("optimizer state: a different optimizer or model");
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (o.s1_[i].size() != s1_[i].size() || o.s2_[i].size() != s2_[i].size())
      throw UsageError("optimizer state: parameter " + std::to_string(i) + " differs in size");
  s1_ = o.s1_, s2_ = o.s2_, t_ = o.t_;
}

void Optimizer::update(float* value, const float* grad, float* s1, float* s2, std::size_t n) const {
  if (cfg_.kind == "sgd")
    cpu::sgd_momentum_step(value, grad, s1, n, cfg_.lr, cfg_.momentum, t_ == 1);
  else if (cfg_.kind == "adamw")
    cpu::seq::adamw_step(value, grad, s1, s2, n, {cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay}, t_);
  else  // Adam is AdamW without the decay (p * 1 is exact): the one vectorized kernel for both
    cpu::seq::adamw_step(value, grad, s1, s2, n, {cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.eps, 0.f}, t_);
}

void Optimizer::step() {
  begin_step();
  // One region for all parameters: each task updates a slice of one tensor (the kernels themselves,
  // called from inside a task, run on that thread). Every element is updated the same way whatever
  // the split.
  constexpr std::size_t kSlice = 16384;  // floats per task
  slices_.clear();
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (std::size_t lo = 0; lo < params_[i]->size(); lo += kSlice)
      slices_.push_back({i, lo, std::min(params_[i]->size(), lo + kSlice)});
  cpu::parallel_tasks(int(slices_.size()), [&](int t) {
    const std::size_t i = slices_[t][0], lo = slices_[t][1], n = slices_[t][2] - lo;
    Param& p = *params_[i];
    float* s2 = state(i, 1);
    update(p.value.data() + lo, p.grad.data() + lo, state(i, 0) + lo, s2 ? s2 + lo : nullptr, n);
  });
}

float gradients(Model& m, const Batch& b, Profiler* prof) {
  {
    ProfileScope r(prof, "zero_grad", "optimizer");
    m.zero_grad();
  }
  struct Detach {  // the model keeps no profiler past this call, also when the step throws
    Model& m;
    ~Detach() { m.set_profiler(nullptr); }
  } detach{m};
  m.set_profiler(prof);
  return m.forward_backward(b);
}

float train_step(Model& m, Optimizer& opt, const Batch& b) {
  const float loss = gradients(m, b);
  opt.step();
  return loss;
}

}  // namespace dlb::models
