// Sequential model, losses and optimizers on the CPU (see net.h).
#include "models/net.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/threads.h"

namespace dlb::models {

Sequential& Sequential::add(std::unique_ptr<Layer> l) {
  layers_.push_back(std::move(l));
  shapes_.clear();
  return *this;
}

std::vector<Layer*> Sequential::layers() const {
  std::vector<Layer*> v;
  for (const auto& l : layers_) v.push_back(l.get());
  return v;
}

std::vector<Param*> Sequential::params() const {
  std::vector<Param*> v;
  for (const auto& l : layers_)
    for (Param* p : l->params()) v.push_back(p);
  return v;
}

std::size_t Sequential::num_params() const {
  std::size_t n = 0;
  for (Param* p : params()) n += p->size();
  return n;
}

std::string Sequential::summary() const {
  std::ostringstream os;
  for (Param* p : params()) {
    os << p->name << ": [";
    for (std::size_t i = 0; i < p->shape.size(); ++i) os << (i ? ", " : "") << p->shape[i];
    os << "]\n";
  }
  return os.str();
}

Shape Sequential::output_shape(int n) const {
  Shape s = input_shape(n);
  for (const auto& l : layers_) s = l->out_shape(s);
  return s;
}

void Sequential::init(std::uint64_t seed) {
  std::uint64_t s = seed * 1000003ULL;
  for (const auto& l : layers_) l->init(s += 17);
}

std::unique_ptr<Sequential> Sequential::clone() const {
  auto c = std::make_unique<Sequential>(name_, in_, loss_);
  for (const auto& l : layers_) c->add(l->clone());
  return c;
}

void Sequential::copy_params_from(const Sequential& other) {
  auto a = params(), b = other.params();
  if (a.size() != b.size()) throw UsageError("copy_params_from: different architectures");
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i]->shape != b[i]->shape) throw UsageError("copy_params_from: shape mismatch in " + a[i]->name);
    a[i]->value = b[i]->value;
  }
}

double Sequential::gradient_l2_error(const Sequential& ref, std::string& worst_tensor) const {
  const auto a = params(), r = ref.params();
  if (a.size() != r.size()) throw UsageError("gradient_l2_error: different architectures");
  double worst = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (a[i]->size() != r[i]->size()) throw UsageError("gradient_l2_error: shape mismatch in " + r[i]->name);
    L2Error e;
    e.add(a[i]->grad.data(), r[i]->grad.data(), r[i]->size());
    if (i == 0 || e.rel() > worst) worst = e.rel(), worst_tensor = r[i]->name;
  }
  return worst;
}

double Sequential::train_flops(int n) const {
  Shape s = input_shape(n);
  double f = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const double fw = layers_[i]->forward_flops(s);
    f += fw * (i == 0 ? 2 : 3);
    s = layers_[i]->out_shape(s);
  }
  return f;
}

std::string Sequential::layer_name(std::size_t i) const {
  const auto ps = layers_.at(i)->params();
  if (!ps.empty()) return ps[0]->name.substr(0, ps[0]->name.find('.'));
  const std::string kind = layers_[i]->kind();
  int ordinal = 0;
  for (std::size_t j = 0; j <= i; ++j) ordinal += layers_[j]->kind() == kind;
  std::string base = kind == "MaxPool2d" ? "pool" : kind;
  for (char& c : base) c = char(std::tolower(static_cast<unsigned char>(c)));
  return base + std::to_string(ordinal);
}

void Sequential::plan(int n) {
  if (!shapes_.empty() && shapes_[0].n == n) return;
  shapes_.assign(layers_.size() + 1, Shape{});
  shapes_[0] = input_shape(n);
  for (std::size_t i = 0; i < layers_.size(); ++i) shapes_[i + 1] = layers_[i]->out_shape(shapes_[i]);
  acts_.resize(layers_.size());
  grads_.resize(layers_.size());
  fused_.assign(layers_.size(), 0);
  for (std::size_t i = 1; i + 1 < layers_.size(); ++i)
    fused_[i] = layers_[i]->kind() == "ReLU" && dynamic_cast<MaxPool2d*>(layers_[i + 1].get()) != nullptr;
  conv_pool_ = layers_.size() >= 3 && dynamic_cast<Conv2d*>(layers_[0].get()) != nullptr && fused_[1];
  conv_pool_on_ = false;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const bool unused_act = fused_[i], unused_grad = i > 0 && fused_[i - 1];
    acts_[i].assign(unused_act ? 0 : shapes_[i + 1].size(), 0.f);
    grads_[i].assign(i == 0 || unused_grad ? 0 : shapes_[i].size(), 0.f);
  }
  dout_.assign(shapes_.back().size(), 0.f);
}

void Sequential::zero_grad() {
  const auto ps = params();
  cpu::parallel_tasks(int(ps.size()), [&](int i) { std::fill(ps[i]->grad.begin(), ps[i]->grad.end(), 0.f); });
}

std::size_t Sequential::forward_conv_pool(const float* x) {
  conv_pool_on_ = conv_pool_ && static_cast<Conv2d*>(layers_[0].get())
                                    ->forward_relu_pool(shapes_[0], *static_cast<MaxPool2d*>(layers_[2].get()), x,
                                                        acts_[2].data());
  return conv_pool_on_ ? 3 : 0;
}

void Sequential::backward_conv_pool(const float* x, const float* dy) {
  static_cast<Conv2d*>(layers_[0].get())
      ->backward_relu_pool(shapes_[0], *static_cast<const MaxPool2d*>(layers_[2].get()), x, acts_[2].data(), dy);
}

const std::vector<float>& Sequential::predict(const float* x, int n) {
  if (n <= 0) throw UsageError("batch must be positive");
  plan(n);
  const std::size_t first = forward_conv_pool(x);
  const float* cur = first ? acts_[first - 1].data() : x;
  for (std::size_t i = first; i < layers_.size(); ++i) {
    if (fused_[i]) {  // ReLU + MaxPool2d in one pass over the ReLU's input
      ++i;
      static_cast<MaxPool2d*>(layers_[i].get())->forward_relu(shapes_[i - 1], cur, acts_[i].data());
    } else {
      layers_[i]->forward(shapes_[i], cur, acts_[i].data());
    }
    cur = acts_[i].data();
  }
  return acts_.back();
}

float Sequential::forward_backward(const Batch& b, const GradsReady& ready) {
  if (prof_) return forward_backward_profiled(b);
  predict(b.x, b.n);
  const Shape& o = shapes_.back();
  const float loss = loss_forward_backward(loss_, acts_.back().data(), b, o.size(), int(o.per_item()), dout_.data());
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const float* xin = i == 0 ? b.x : acts_[i - 1].data();
    const float* dy = i + 1 == layers_.size() ? dout_.data() : grads_[i + 1].data();
    if (i == 2 && conv_pool_on_) {  // the first Conv2d + ReLU + MaxPool2d, fused as in forward
      backward_conv_pool(b.x, dy);
      if (ready) ready(layers_[0]->params());
      break;
    }
    if (i > 0 && fused_[i - 1]) {  // MaxPool2d + the ReLU before it: dx goes straight to layer i - 2
      static_cast<MaxPool2d*>(layers_[i].get())->backward_relu(shapes_[i - 1], acts_[i].data(), dy, grads_[i - 1].data());
      --i;
      continue;
    }
    layers_[i]->backward(shapes_[i], xin, acts_[i].data(), dy, i == 0 ? nullptr : grads_[i].data());
    if (ready) {
      const auto ps = layers_[i]->params();
      if (!ps.empty()) ready(ps);
    }
  }
  return loss;
}

// The same arithmetic as forward_backward(), one region per layer (a fused ReLU + MaxPool2d pass is
// one region, "relu1+pool1") and direction. Region FLOPs: forward as Layer::forward_flops, backward
// twice that (data + weight gradients; the first layer computes no input gradient: once).
float Sequential::forward_backward_profiled(const Batch& b) {
  Profiler* p = prof_;
  plan(b.n);
  auto fused_name = [&](std::size_t i) { return layer_name(i) + "+" + layer_name(i + 1); };
  {
    ProfileScope fw(p, "forward", "phase");
    std::size_t first = 0;
    if (conv_pool_ && static_cast<Conv2d*>(layers_[0].get())
                          ->relu_pool_fusable(shapes_[0], *static_cast<MaxPool2d*>(layers_[2].get()))) {
      const std::string nm = layer_name(0) + "+" + fused_name(1);
      ProfileScope r(p, "forward " + nm, "forward", nm, layers_[0]->forward_flops(shapes_[0]));
      first = forward_conv_pool(b.x);
    }
    const float* cur = first ? acts_[first - 1].data() : b.x;
    for (std::size_t i = first; i < layers_.size(); ++i) {
      if (fused_[i]) {
        const std::string nm = fused_name(i);
        ProfileScope r(p, "forward " + nm, "forward", nm, layers_[i + 1]->forward_flops(shapes_[i + 1]));
        ++i;
        static_cast<MaxPool2d*>(layers_[i].get())->forward_relu(shapes_[i - 1], cur, acts_[i].data());
      } else {
        const std::string nm = layer_name(i);
        ProfileScope r(p, "forward " + nm, "forward", nm, layers_[i]->forward_flops(shapes_[i]));
        layers_[i]->forward(shapes_[i], cur, acts_[i].data());
      }
      cur = acts_[i].data();
    }
  }
  const Shape& o = shapes_.back();
  float loss = 0;
  {
    ProfileScope r(p, "loss", "loss");
    loss = loss_forward_backward(loss_, acts_.back().data(), b, o.size(), int(o.per_item()), dout_.data());
  }
  ProfileScope bw(p, "backward", "phase");
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const float* xin = i == 0 ? b.x : acts_[i - 1].data();
    const float* dy = i + 1 == layers_.size() ? dout_.data() : grads_[i + 1].data();
    if (i == 2 && conv_pool_on_) {
      const std::string nm = layer_name(0) + "+" + fused_name(1);
      ProfileScope r(p, "backward " + nm, "backward", nm, layers_[0]->forward_flops(shapes_[0]));
      backward_conv_pool(b.x, dy);
      break;
    }
    if (i > 0 && fused_[i - 1]) {
      const std::string nm = fused_name(i - 1);
      ProfileScope r(p, "backward " + nm, "backward", nm, 2 * layers_[i]->forward_flops(shapes_[i]));
      static_cast<MaxPool2d*>(layers_[i].get())->backward_relu(shapes_[i - 1], acts_[i].data(), dy, grads_[i - 1].data());
      --i;
      continue;
    }
    const std::string nm = layer_name(i);
    ProfileScope r(p, "backward " + nm, "backward", nm, (i == 0 ? 1 : 2) * layers_[i]->forward_flops(shapes_[i]));
    layers_[i]->backward(shapes_[i], xin, acts_[i].data(), dy, i == 0 ? nullptr : grads_[i].data());
  }
  return loss;
}

void Sequential::sync_ref() {
  for (Param* p : params()) p->ref_value.assign(p->value.begin(), p->value.end());
}

double Sequential::forward_backward_ref(const double* x, const Batch& b, std::vector<double>* dx) {
  const int n = b.n;
  std::vector<Shape> sh(layers_.size() + 1);
  sh[0] = input_shape(n);
  for (std::size_t i = 0; i < layers_.size(); ++i) sh[i + 1] = layers_[i]->out_shape(sh[i]);
  std::vector<std::vector<double>> act(layers_.size());
  const double* cur = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    act[i].assign(sh[i + 1].size(), 0.0);
    layers_[i]->forward_ref(sh[i], cur, act[i].data());
    cur = act[i].data();
  }
  for (Param* p : params()) p->ref_grad.assign(p->size(), 0.0);
  std::vector<double> dy(sh.back().size());
  const double loss =
      loss_forward_backward_ref(loss_, act.back().data(), b, x, sh.back().size(), int(sh.back().per_item()), dy.data());
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const bool need_dx = i > 0 || dx != nullptr;
    std::vector<double> g(need_dx ? sh[i].size() : 0);
    layers_[i]->backward_ref(sh[i], i == 0 ? x : act[i - 1].data(), act[i].data(), dy.data(), need_dx ? g.data() : nullptr);
    dy.swap(g);
  }
  if (dx) *dx = std::move(dy);
  return loss;
}

double Sequential::loss_ref(const double* x, const Batch& b) {
  Shape s = input_shape(b.n);
  std::vector<double> cur(x, x + s.size()), next;
  for (const auto& l : layers_) {
    const Shape o = l->out_shape(s);
    next.assign(o.size(), 0.0);
    l->forward_ref(s, cur.data(), next.data());
    cur.swap(next);
    s = o;
  }
  return loss_forward_backward_ref(loss_, cur.data(), b, x, s.size(), int(s.per_item()), nullptr);
}

float loss_forward_backward(LossKind k, const float* out, const Batch& b, std::size_t out_size, int classes, float* d) {
  if (k == LossKind::cross_entropy) {
    if (!b.labels) throw UsageError("cross-entropy needs labels");
    for (int i = 0; i < b.n; ++i)
      if (b.labels[i] < 0 || b.labels[i] >= classes)
        throw InputError("label " + std::to_string(b.labels[i]) + " outside [0, " + std::to_string(classes) + ")");
    return cpu::softmax_xent_forward_backward(out, b.labels, b.n, classes, d);
  }
  const float* t = b.target ? b.target : b.x;
  return cpu::mse_forward_backward(out, t, out_size, d);
}

double loss_forward_backward_ref(LossKind k, const double* out, const Batch& b, const double* x_ref,
                                 std::size_t out_size, int classes, double* d) {
  if (k == LossKind::cross_entropy) {
    double total = 0;
    for (int i = 0; i < b.n; ++i) {
      const double* z = out + std::size_t(i) * classes;
      double mx = z[0];
      for (int j = 1; j < classes; ++j) mx = std::max(mx, z[j]);
      double s = 0;
      for (int j = 0; j < classes; ++j) s += std::exp(z[j] - mx);
      const double lse = mx + std::log(s);
      total += lse - z[b.labels[i]];
      if (d)
        for (int j = 0; j < classes; ++j)
          d[std::size_t(i) * classes + j] = (std::exp(z[j] - lse) - (j == b.labels[i] ? 1.0 : 0.0)) / b.n;
    }
    return total / b.n;
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
  if (cfg_.kind != "sgd" && cfg_.kind != "adam") throw UsageError("optimizer '" + cfg_.kind + "': expected sgd or adam");
  if (!(cfg_.lr > 0) || !std::isfinite(cfg_.lr)) throw UsageError("learning rate must be a positive number");
  for (Param* p : params_) {
    s1_.emplace_back(p->size(), 0.f);
    s2_.emplace_back(cfg_.kind == "adam" ? p->size() : 0, 0.f);
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
  else
    cpu::adam_step(value, grad, s1, s2, n, cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.eps, t_);
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

float train_step(Sequential& m, Optimizer& opt, const Batch& b) {
  m.zero_grad();
  const float loss = m.forward_backward(b);
  opt.step();
  return loss;
}

}  // namespace dlb::models
