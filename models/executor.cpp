// The CPU executor (see executor.h).
#include "models/executor.h"

#include <cstring>
#include <string>

#include "kernels/common/errors.h"
#include "models/half.h"

namespace dlb::models {

const Plan& Executor::plan(const Model& m, int n) {
  if (planned_ && plan_.current(m, n, dtype_, Device::cpu)) return plan_;
  plan_ = make_plan(m, n, dtype_, Device::cpu);
  planned_ = true;
  const std::size_t values = plan_.shapes.size();
  act_.assign(values, {});
  grad_.assign(values, {});
  data_.assign(values, nullptr);
  copy_.assign(std::size_t(m.num_inputs()), {});
  for (const Step& s : plan_.steps) {
    const auto v = std::size_t(s.out);
    act_[v].assign(plan_.shapes[v].size(), 0.f);
    grad_[v].assign(plan_.shapes[v].size(), 0.f);
    data_[v] = act_[v].data();
  }
  scratch_.assign(plan_.steps.size(), {});
  return plan_;
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
  const auto& nodes = m.nodes();
  Layer* layers[3];
  Shape in[Layer::kMaxInputs];
  const void* xs[Layer::kMaxInputs];
  ProfileScope phase(p, "forward", "phase");
  for (std::size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    ProfileScope r(p, p ? "forward " + s.name : std::string(), "forward", p ? s.name : std::string(), s.fwd_flops,
                   s.fwd_algo);
    for (int j = 0; j < s.nodes; ++j) layers[j] = nodes[std::size_t(s.node + j)].layer.get();
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      const auto v = std::size_t(s.in[k]);
      in[k] = plan_.shapes[v];
      if (s.round_in[k]) round_to(plan_.dtype, mutable_data(int(v)), in[k].size());  // autocast's cast of the input
      xs[k] = data_[v];
    }
    float* y = act_[std::size_t(s.out)].data();
    StepArgs a{layers, Shapes(in, int(s.in.size())), xs, y};
    if (s.hand_from >= 0) a.x16 = scratch_[std::size_t(s.hand_from)].y16.data();
    if (s.hand_on >= 0) {
      scratch_[i].y16.resize(plan_.shapes[std::size_t(s.out)].size());
      a.y16 = scratch_[i].y16.data();
    }
    step_forward(s, a, scratch_[i]);
    if (s.round_out != DType::fp32) round_to(s.round_out, y, plan_.shapes[std::size_t(s.out)].size());
  }
}

const std::vector<float>& Executor::forward(Model& m, const Batch& b, Profiler* p) {
  run_forward(m, b, p);
  return act_[std::size_t(m.output_value())];
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
    const Step& s = plan_.steps[i];
    ProfileScope r(p, p ? "backward " + s.name : std::string(), "backward", p ? s.name : std::string(), s.bwd_flops,
                   s.bwd_algo);
    for (int j = 0; j < s.nodes; ++j) layers[j] = nodes[std::size_t(s.node + j)].layer.get();
    float* dy = grad_[std::size_t(s.out)].data();
    if (s.round_dy != DType::fp32) round_to(s.round_dy, dy, plan_.shapes[std::size_t(s.out)].size());
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      const auto v = std::size_t(s.in[k]);
      in[k] = plan_.shapes[v], xs[k] = data_[v], dxs[k] = nullptr;
      if (!s.dx[k]) continue;
      if (s.accumulate[k]) part_[k].resize(in[k].size()), dxs[k] = part_[k].data();
      else dxs[k] = grad_[v].data();
    }
    StepArgs a{layers, Shapes(in, int(s.in.size())), xs, act_[std::size_t(s.out)].data(), dy, dxs};
    step_backward(s, a, scratch_[i]);
    for (std::size_t k = 0; k < s.in.size(); ++k) {
      if (!s.dx[k]) continue;
      float* g = grad_[std::size_t(s.in[k])].data();
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
