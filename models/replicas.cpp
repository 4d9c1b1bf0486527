// The replica step for small batches (see replicas.h).
#include "models/replicas.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/threads.h"

namespace dlb::models {
namespace {
// Elements per optimizer call: the weighted gradient sum stays in L1 between its write and the update.
constexpr std::size_t kChunk = 2048;

bool same_bits(const float* a, const float* b) { return std::memcmp(a, b, sizeof(float)) == 0; }
}  // namespace

int ReplicaStep::replicas_for(int n) {
  const int t = cpu::kernel_threads();
  if (t < 2 || n < 2 || n > kMaxBatch) return 1;
  return std::min({t, n, kMaxReplicas});
}

std::vector<const Model*> ReplicaStep::replicas() const {
  std::vector<const Model*> v;
  for (const auto& r : reps_) v.push_back(r.model.get());
  return v;
}

bool ReplicaStep::in_sync(Model& m, Optimizer& opt, int replicas) const {
  if (model_ != &m || opt_ != &opt || int(reps_.size()) != replicas - 1 || synced_step_ != opt.steps()) return false;
  // Values changed outside the step (init, copy_params_from, a loaded checkpoint) change every element
  // in practice: a few per tensor tell. Reading them shares only those lines with the replicas' cores.
  const auto ps = m.params();
  for (const auto& r : reps_)
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::size_t n = ps[i]->size();
      for (std::size_t e : {std::size_t(0), n / 2, n - 1})
        if (n && !same_bits(&ps[i]->value[e], &r.params[i]->value[e])) return false;
    }
  return true;
}

void ReplicaStep::sync(Model& m, Optimizer& opt, int replicas) {
  if (model_ != &m) reps_.clear();
  reps_.resize(std::size_t(replicas - 1));
  const auto ps = m.params();
  for (auto& r : reps_) {
    if (!r.model) r.model = m.clone();
    else r.model->copy_params_from(m);
    r.params = r.model->params();
    r.s1.assign(ps.size(), {});
    r.s2.assign(ps.size(), {});
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (const float* s = opt.state(i, 0)) r.s1[i].assign(s, s + ps[i]->size());
      if (const float* s = opt.state(i, 1)) r.s2[i].assign(s, s + ps[i]->size());
    }
  }
  model_ = &m;
  opt_ = &opt;
  synced_step_ = opt.steps();
}

float ReplicaStep::step(Model& m, Optimizer& opt, const Batch& b) {
  const int R = replicas_for(b.n);
  if (R < 2) return train_step(m, opt, b);
  if (!in_sync(m, opt, R)) sync(m, opt, R);

  const auto ps = m.params();
  const std::size_t in_item = m.input_shape(1).per_item(), out_item = m.output_shape(1).per_item();
  std::array<long, kMaxReplicas> first{}, count{};
  std::array<float, kMaxReplicas> share{}, loss{};
  for (int k = 0; k < R; ++k) {
    long hi = 0;
    cpu::split_range(b.n, R, k, first[k], hi);
    count[k] = hi - first[k];
    share[k] = float(double(count[k]) / b.n);
  }
  auto params_of = [&](int k) -> const std::vector<Param*>& { return k ? reps_[k - 1].params : ps; };
  // Replica j's copy of the optimizer state of parameter i (replica 0: the optimizer's own), or null.
  auto state_of = [&](int j, std::size_t i, int which) -> float* {
    if (!j) return opt.state(i, which);
    auto& v = (which == 0 ? reps_[j - 1].s1 : reps_[j - 1].s2)[i];
    return v.empty() ? nullptr : v.data();
  };

  // Each thread: its replica's gradients zeroed (the other threads read them last step), then forward
  // and backward over its share with every kernel single-threaded (a region's tasks run nested ones
  // themselves).
  cpu::parallel_tasks(R, [&](int k) {
    Model& r = k ? *reps_[k - 1].model : m;
    for (Param* p : params_of(k)) cpu::zero_streaming(p->grad.data(), p->size());
    const Batch s{b.x + first[k] * in_item, b.labels ? b.labels + first[k] : nullptr,
                  b.target ? b.target + first[k] * out_item : nullptr, int(count[k])};
    loss[k] = r.forward_backward(s);
  });

  // Each thread: the batch gradient (the shares' gradients weighted, in replica order) and the
  // optimizer's update of its own replica with its own copy of the state.
  opt.begin_step();
  cpu::parallel_tasks(R, [&](int j) {
    alignas(64) float g[kChunk];
    std::array<const float*, kMaxReplicas> parts{};
    for (std::size_t i = 0; i < ps.size(); ++i) {
      Param& own = *params_of(j)[i];
      float *s1 = state_of(j, i, 0), *s2 = state_of(j, i, 1);
      for (std::size_t lo = 0; lo < own.size(); lo += kChunk) {
        const std::size_t c = std::min(kChunk, own.size() - lo);
        for (int k = 0; k < R; ++k) parts[k] = params_of(k)[i]->grad.data() + lo;
        cpu::weighted_sum(g, parts.data(), share.data(), R, c);
        opt.update(own.value.data() + lo, g, s1 ? s1 + lo : nullptr, s2 ? s2 + lo : nullptr, c);
      }
    }
  });
  synced_step_ = opt.steps();

  float total = 0;
  for (int k = 0; k < R; ++k) total += loss[k] * share[k];
  return total;
}

}  // namespace dlb::models
