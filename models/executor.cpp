// The CPU executor (see executor.h).
#include "models/executor.h"

#include <cstring>
#include <string>

#include "kernels/common/errors.h"
#include "models/half.h"

namespace dlb::models {

const Plan& Executor::plan(const Model& m, int n) {
  if (planned_ && checkpointing_ == m.checkpointing() && plan_.current(m, n, dtype_, Device::cpu)) return plan_;
  plan_ = make_plan(m, n, dtype_, Device::cpu);
  planned_ = true, checkpointing_ = m.checkpointing();
  const std::size_t values = plan_.shapes.size();
  act_.assign(values, {});
  grad_.assign(values, {});
  data_.assign(values, nullptr);
  y_.assign(values, nullptr), dy_.assign(values, nullptr);
  copy_.assign(std::size_t(m.num_inputs()), {});
  const std::vector<int> slot = checkpoint_slots(m);
  slot_act_.clear(), slot_grad_.clear();
  for (const Step& s : plan_.steps) {
    const auto v = std::size_t(s.out);
    const std::size_t size = plan_.shapes[v].size();
    if (slot[v] < 0) {
      act_[v].assign(size, 0.f), grad_[v].assign(size, 0.f);
      continue;
    }
    const auto k = std::size_t(slot[v]);
    if (k >= slot_act_.size()) slot_act_.resize(k + 1), slot_grad_.resize(k + 1);
    if (slot_act_[k].size() < size) slot_act_[k].assign(size, 0.f), slot_grad_[k].assign(size, 0.f);
  }
  for (const Step& s : plan_.steps) {
    const auto v = std::size_t(s.out);
    const bool shared = slot[v] >= 0;
    y_[v] = shared ? slot_act_[std::size_t(slot[v])].data() : act_[v].data();
    dy_[v] = shared ? slot_grad_[std::size_t(slot[v])].data() : grad_[v].data();
    data_[v] = y_[v];
  }
  scratch_.assign(plan_.steps.size(), {});
  return plan_;
}

std::vector<int> Executor::checkpoint_slots(const Model& m) {
  std::vector<int> slot(plan_.shapes.size(), -1), owner(plan_.shapes.size(), -1);
  recompute_.assign(plan_.steps.size(), -1);
  if (!m.checkpointing()) return slot;
  const auto& steps = plan_.steps;
  const auto& segs = m.checkpoint_segments();
  for (std::size_t g = 0; g < segs.size(); ++g) {
    const auto [first, end] = segs[g];
    int a = -1, b = -1;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const int lo = steps[i].node, hi = lo + steps[i].nodes;
      if (hi <= first || lo >= end) continue;
      if (lo < first || hi > end)
        throw UsageError("model " + m.name() + ": step " + steps[i].name + " straddles checkpoint segment " + std::to_string(g));
      if (a < 0) a = int(i);
      b = int(i);
    }
    if (a < 0) continue;
    recompute_[std::size_t(b)] = a;
    for (int i = a; i < b; ++i) {
      const auto v = std::size_t(steps[std::size_t(i)].out);
      slot[v] = i - a, owner[v] = int(g);
    }
  }
  // A dropped value read outside its segment (or by no step) would be read stale.
  std::vector<char> read(slot.size(), 0);
  for (std::size_t i = 0; i < steps.size(); ++i)
    for (int v : steps[i].in) {
      const auto u = std::size_t(v);
      read[u] = 1;
      if (slot[u] < 0) continue;
      const auto [first, end] = segs[std::size_t(owner[u])];
      if (steps[i].node < first || steps[i].node >= end)
        throw UsageError("model " + m.name() + ": step " + steps[i].name + " reads a value checkpoint segment " +
                         std::to_string(owner[u]) + " drops");
    }
  for (std::size_t v = 0; v < slot.size(); ++v)
    if (slot[v] >= 0 && !read[v]) throw UsageError("model " + m.name() + ": a value in a checkpoint segment is read by no step");
  return slot;
}

std::size_t Executor::activation_bytes() const {
  std::size_t n = 0;
  for (const auto* set : {&act_, &grad_, &slot_act_, &slot_grad_, &copy_})
    for (const auto& b : *set) n += b.size();
  return n * sizeof(float);
}

void Executor::run_forward(Model& m, const Batch& b, Profiler* p) {
  plan(m, b.n);
  for (int k = 0; k < m.num_inputs(); ++k) {
    const auto v = std::size_t(m.input_value(k));
    data_[v] = b.input(k);
    if (!data_[v]) throw UsageError("model " + m.name() + ": input " + std::to_string(k) + " not in the batch");
    if (!plan_.cast_input[std::size_t(k)]) continue;  // a step rounds it in place: work on a copy
    auto& c = copy_[std::size_t(k)];
    c.resize(plan_.shapes[v].size());
    std::memcpy(c.data(), data_[v], c.size() * sizeof(float));
    data_[v] = c.data();
  }
  ProfileScope phase(p, "forward", "phase");
  for (std::size_t i = 0; i < plan_.steps.size(); ++i) forward_step(m, i, p, "forward ");
}

// Step i's forward (`what`: its profile region's prefix, "forward " or "recompute ").
void Executor::forward_step(const Model& m, std::size_t i, Profiler* p, const char* what) {
  const auto& nodes = m.nodes();
  Layer* layers[3];
  Shape in[Layer::kMaxInputs];
  const void* xs[Layer::kMaxInputs];
  const Step& s = plan_.steps[i];
  ProfileScope r(p, p ? what + s.name : std::string(), "forward", p ? s.name : std::string(), s.fwd_flops, s.fwd_algo);
  for (int j = 0; j < s.nodes; ++j) layers[j] = nodes[std::size_t(s.node + j)].layer.get();
  for (std::size_t k = 0; k < s.in.size(); ++k) {
    const auto v = std::size_t(s.in[k]);
    in[k] = plan_.shapes[v];
    if (s.round_in[k]) round_to(plan_.dtype, mutable_data(int(v)), in[k].size());  // autocast's cast of the input
    xs[k] = data_[v];
  }
  float* y = y_[std::size_t(s.out)];
  StepArgs a{layers, Shapes(in, int(s.in.size())), xs, y};
  if (s.hand_from >= 0) a.x16 = scratch_[std::size_t(s.hand_from)].y16.data();
  if (s.hand_on >= 0) {
    scratch_[i].y16.resize(plan_.shapes[std::size_t(s.out)].size());
    a.y16 = scratch_[i].y16.data();
  }
  step_forward(s, a, scratch_[i]);
  if (s.round_out != DType::fp32) round_to(s.round_out, y, plan_.shapes[std::size_t(s.out)].size());
}

const std::vector<float>& Executor::forward(Model& m, const Batch& b, Profiler* p) {
  run_forward(m, b, p);
  return act_[std::size_t(m.output_value())];  // never a checkpoint slot (read by no step)
}

float Executor::forward_backward(Model& m, const Batch& b, const Hooks& h) {
  Profiler* p = h.prof;
  run_forward(m, b, p);
  const auto out = std::size_t(m.output_value());
  const Shape& o = plan_.shapes[out];
  float loss = 0;
  {
    ProfileScope r(p, "loss", "loss");
    loss = loss_forward_backward(m.loss(), act_[out].data(), b, o.size(), o.last(), grad_[out].data());
  }
  if (h.loss_scale != 1.0f)
    for (float& d : grad_[out]) d *= h.loss_scale;

  const auto& nodes = m.nodes();
  Layer* layers[3];
  Shape in[Layer::kMaxInputs];
  const void* xs[Layer::kMaxInputs];
  float* dxs[Layer::kMaxInputs];
  ProfileScope phase(p, "backward", "phase");
  for (std::size_t i = plan_.steps.size(); i-- > 0;) {
    if (recompute_[i] >= 0)  // checkpointing: the segment's values again, from its inputs
      for (auto j = std::size_t(recompute_[i]); j <= i; ++j) forward_step(m, j, p, "recompute ");
    const Step& s = plan_.steps[i];
    ProfileScope r(p, p ? "backward " + s.name : std::string(), "backward", p ? s.name : std::string(), s.bwd_flops,
                   s.bwd_algo);
    for (int j = 0; j < s.nodes; ++j) layers[j] = nodes[std::size_t(s.node + j)].layer.get();
    float* dy = dy_[std::size_t(s.out)];
    if (s.round_dy != DType::fp32) round_to(s.round_dy, dy, plan_.shapes[std::size_t(s.out)].size());
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      const auto v = std::size_t(s.in[k]);
      in[k] = plan_.shapes[v], xs[k] = data_[v], dxs[k] = nullptr;
      if (!s.dx[k]) continue;
      if (s.accumulate[k]) part_[k].resize(in[k].size()), dxs[k] = part_[k].data();
      else dxs[k] = dy_[v];
    }
    StepArgs a{layers, Shapes(in, int(s.in.size())), xs, y_[std::size_t(s.out)], dy, dxs};
    step_backward(s, a, scratch_[i]);
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      if (!s.dx[k]) continue;
      float* g = dy_[std::size_t(s.in[k])];
      if (s.accumulate[k]) add_into(g, part_[k].data(), in[k].size());
      if (s.round_dx != DType::fp32) round_to(s.round_dx, g, in[k].size());
    }
    if (s.round_dw)
      for (int j = 0; j < s.nodes; ++j)
        for (Param* q : layers[j]->params()) round_to(plan_.dtype, q->grad.data(), q->grad.size());
    if (h.ready && !s.ready.empty()) (*h.ready)(s.ready);
  }
  return loss;
}

}  // namespace dlb::models
