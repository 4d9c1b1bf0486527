// The model graph and its fp64 reference walk (see model.h); the fp32 step is the executor's.
#include "models/model.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/threads.h"
#include "models/executor.h"

namespace dlb::models {

Model::Model(std::string name, Shape input, LossKind loss, bool integer_input) : name_(std::move(name)), loss_(loss) {
  inputs_.push_back({input.with_batch(1), integer_input, 0});
  producer_.push_back(-1);
}

Model::~Model() = default;

Model& Model::add(std::unique_ptr<Layer> l) {
  node(std::move(l), {output_value()});
  return *this;
}

int Model::node(std::unique_ptr<Layer> l, std::vector<int> in) {
  if (int(in.size()) != l->inputs() || in.size() > std::size_t(Layer::kMaxInputs))
    throw UsageError(std::string(op_name(l->op())) + ": takes " + std::to_string(l->inputs()) + " inputs, given " +
                     std::to_string(in.size()));
  for (int v : in)
    if (v < 0 || v >= int(producer_.size())) throw UsageError("Model::node: no value " + std::to_string(v));
  const int out = int(producer_.size());
  producer_.push_back(int(nodes_.size()));
  nodes_.push_back(Node{std::move(l), std::move(in), out});
  return out;
}

int Model::add_input(Shape item, bool integer) {
  const int v = int(producer_.size());
  producer_.push_back(-1 - int(inputs_.size()));
  inputs_.push_back({item.with_batch(1), integer, v});
  return v;
}

bool Model::integer_value(int value) const {
  const int p = producer(value);
  return p < 0 && inputs_[std::size_t(-1 - p)].integer;
}

std::vector<Layer*> Model::layers() const {
  std::vector<Layer*> v;
  for (const auto& nd : nodes_) v.push_back(nd.layer.get());
  return v;
}

std::vector<Shape> Model::value_shapes(int n) const {
  std::vector<Shape> sh(producer_.size());
  for (const Input& i : inputs_) sh[std::size_t(i.value)] = i.item.with_batch(n);
  Shape in[Layer::kMaxInputs];
  for (const Node& nd : nodes_) {
    for (std::size_t k = 0; k < nd.in.size(); ++k) in[k] = sh[std::size_t(nd.in[k])];
    sh[std::size_t(nd.out)] = nd.layer->out_shape(Shapes(in, int(nd.in.size())));
  }
  return sh;
}

std::vector<Param*> Model::params() const {
  std::vector<Param*> v;
  for (const auto& nd : nodes_)
    for (Param* p : nd.layer->params())
      if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
  return v;
}

std::size_t Model::num_params() const {
  std::size_t n = 0;
  for (Param* p : params()) n += p->size();
  return n;
}

std::string Model::summary() const {
  std::ostringstream os;
  for (Param* p : params()) {
    os << p->name << ": [";
    for (std::size_t i = 0; i < p->shape.size(); ++i) os << (i ? ", " : "") << p->shape[i];
    os << "]\n";
  }
  return os.str();
}

void Model::init(std::uint64_t seed) {
  std::uint64_t s = seed * 1000003ULL;
  for (const auto& nd : nodes_) nd.layer->init(s += 17);
}

std::unique_ptr<Model> Model::clone() const {
  auto c = std::make_unique<Model>(name_, inputs_.front().item, loss_);
  c->inputs_ = inputs_;
  c->producer_ = producer_;
  c->segments_ = segments_, c->checkpointing_ = checkpointing_;
  std::map<const Param*, Param*> copy_of;  // an original's own parameter -> the copy's
  for (const Node& nd : nodes_) {
    auto l = nd.layer->clone();
    const auto mine = nd.layer->params(), theirs = l->params();
    const auto lent = nd.layer->borrowed();
    for (std::size_t q = 0; q < mine.size(); ++q)
      if (std::none_of(lent.begin(), lent.end(), [&](Param** s) { return *s == mine[q]; })) copy_of[mine[q]] = theirs[q];
    c->nodes_.push_back(Node{std::move(l), nd.in, nd.out});
  }
  for (const Node& nd : c->nodes_)
    for (Param** slot : nd.layer->borrowed()) *slot = copy_of.at(*slot);
  return c;
}

void Model::copy_params_from(const Model& other) {
  auto a = params(), b = other.params();
  if (a.size() != b.size()) throw UsageError("copy_params_from: different architectures");
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i]->shape != b[i]->shape) throw UsageError("copy_params_from: shape mismatch in " + a[i]->name);
    a[i]->value = b[i]->value;
  }
}

double Model::gradient_l2_error(const Model& ref, std::string& worst_tensor) const {
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

double Model::flops(int n, bool train) const {
  const auto sh = value_shapes(n);
  double f = 0;
  Shape in[Layer::kMaxInputs];
  for (const Node& nd : nodes_) {
    bool dx = false;
    for (std::size_t k = 0; k < nd.in.size(); ++k) in[k] = sh[std::size_t(nd.in[k])], dx |= !is_input(nd.in[k]);
    f += nd.layer->forward_flops(Shapes(in, int(nd.in.size()))) * (!train ? 1 : dx ? 3 : 2);
  }
  return f;
}

void Model::set_step(bool training, std::uint64_t step) {
  for (const Node& nd : nodes_) nd.layer->set_step(training, step);
}

std::string Model::layer_name(std::size_t i) const {
  const auto ps = nodes_.at(i).layer->params();
  // The module's path: the parameter's name less its last part ("conv1", "lstm",
  // "transformer.encoder.layers.0.self_attn").
  if (!ps.empty()) return ps[0]->name.substr(0, ps[0]->name.rfind('.'));
  const Op op = nodes_[i].layer->op();
  int ordinal = 0;
  for (std::size_t j = 0; j <= i; ++j) ordinal += nodes_[j].layer->op() == op;
  return op_info(op).short_name + std::to_string(ordinal);
}

void Model::zero_grad() {
  const auto ps = params();
  cpu::parallel_tasks(int(ps.size()), [&](int i) { std::fill(ps[i]->grad.begin(), ps[i]->grad.end(), 0.f); });
}

void Model::add_checkpoint_segment(int first_node, int end_node) {
  if (first_node < 0 || end_node <= first_node || end_node > int(nodes_.size()))
    throw UsageError("model " + name_ + ": checkpoint segment [" + std::to_string(first_node) + ", " +
                     std::to_string(end_node) + ") outside its " + std::to_string(nodes_.size()) + " nodes");
  for (const auto& [f, e] : segments_)
    if (first_node < e && f < end_node) throw UsageError("model " + name_ + ": checkpoint segments overlap");
  segments_.emplace_back(first_node, end_node);
}

std::size_t Model::activation_bytes() const { return exec_ ? exec_->activation_bytes() : 0; }

float Model::forward_backward(const Batch& b, const GradsReady& ready) {
  if (!exec_) exec_ = std::make_unique<Executor>(DType::fp32);
  return exec_->forward_backward(*this, b, {prof_, ready ? &ready : nullptr, 1.0f});
}

const std::vector<float>& Model::predict(const Batch& b) {
  if (!exec_) exec_ = std::make_unique<Executor>(DType::fp32);
  return exec_->forward(*this, b, nullptr);
}

const std::vector<float>& Model::predict(const float* x, int n) { return predict(Batch{x, nullptr, nullptr, n}); }

// ---- the fp64 reference ----

void Model::sync_ref() {
  for (Param* p : params()) p->ref_value.assign(p->value.begin(), p->value.end());
}

// Every value in fp64, input 0 from x, the other float inputs widened from b; integer inputs are
// read in place (their slot stays empty).
std::vector<std::vector<double>> Model::ref_forward(const double* x, const Batch& b, const std::vector<Shape>& sh) const {
  if (b.n <= 0) throw UsageError("batch must be positive");
  std::vector<std::vector<double>> act(sh.size());
  auto data = [&](int v) -> const void* {
    if (integer_value(v)) return b.input(-1 - producer(v));
    if (v == 0) return x;
    return act[std::size_t(v)].data();
  };
  for (std::size_t k = 1; k < inputs_.size(); ++k)
    if (!inputs_[k].integer) {
      const auto* f = static_cast<const float*>(b.input(int(k)));
      act[std::size_t(inputs_[k].value)].assign(f, f + sh[std::size_t(inputs_[k].value)].size());
    }
  Shape in[Layer::kMaxInputs];
  const void* xs[Layer::kMaxInputs];
  for (const Node& nd : nodes_) {
    for (std::size_t k = 0; k < nd.in.size(); ++k) in[k] = sh[std::size_t(nd.in[k])], xs[k] = data(nd.in[k]);
    auto& y = act[std::size_t(nd.out)];
    y.assign(sh[std::size_t(nd.out)].size(), 0.0);
    nd.layer->forward_ref(Fwd<double>{Shapes(in, int(nd.in.size())), xs, y.data()});
  }
  return act;
}

double Model::forward_backward_ref(const double* x, const Batch& b, std::vector<double>* dx) {
  const auto sh = value_shapes(b.n);
  auto act = ref_forward(x, b, sh);
  for (Param* p : params()) p->ref_grad.assign(p->size(), 0.0);
  const int out = output_value();
  std::vector<std::vector<double>> grad(sh.size());
  std::vector<char> written(sh.size(), 0);
  grad[std::size_t(out)].assign(sh[std::size_t(out)].size(), 0.0);
  written[std::size_t(out)] = 1;
  const double loss = loss_forward_backward_ref(loss_, act[std::size_t(out)].data(), b, x, sh[std::size_t(out)].size(),
                                                sh[std::size_t(out)].last(), grad[std::size_t(out)].data());
  Shape in[Layer::kMaxInputs];
  const void* xs[Layer::kMaxInputs];
  double* dxs[Layer::kMaxInputs];
  std::vector<double> part[Layer::kMaxInputs];  // a gradient to add to one written already
  bool to_part[Layer::kMaxInputs];
  for (std::size_t j = nodes_.size(); j-- > 0;) {
    const Node& nd = nodes_[j];
    for (std::size_t k = 0; k < nd.in.size(); ++k) {
      const auto v = std::size_t(nd.in[k]);
      in[k] = sh[v];
      xs[k] = integer_value(int(v)) ? b.input(-1 - producer(int(v))) : v == 0 ? x : act[v].data();
      dxs[k] = nullptr;
      to_part[k] = false;
      const bool want = !integer_value(int(v)) && (!is_input(int(v)) || (v == 0 && dx));
      if (!want) continue;
      // into a part when the value has a gradient already, or an earlier input of this node is it
      to_part[k] = written[v] != 0;
      for (std::size_t e = 0; e < k; ++e) to_part[k] = to_part[k] || (nd.in[e] == nd.in[k] && dxs[e]);
      if (to_part[k]) {
        part[k].assign(sh[v].size(), 0.0);
        dxs[k] = part[k].data();
      } else {
        grad[v].assign(sh[v].size(), 0.0);
        dxs[k] = grad[v].data();
      }
    }
    nd.layer->backward_ref(Bwd<double>{Shapes(in, int(nd.in.size())), xs, act[std::size_t(nd.out)].data(),
                                       grad[std::size_t(nd.out)].data(), dxs});
    for (std::size_t k = 0; k < nd.in.size(); ++k) {
      const auto v = std::size_t(nd.in[k]);
      if (!dxs[k]) continue;
      if (to_part[k])
        for (std::size_t e = 0; e < part[k].size(); ++e) grad[v][e] += part[k][e];
      written[v] = 1;
    }
  }
  if (dx) *dx = std::move(grad[0]);
  return loss;
}

double Model::loss_ref(const double* x, const Batch& b) {
  const auto sh = value_shapes(b.n);
  const auto act = ref_forward(x, b, sh);
  const auto out = std::size_t(output_value());
  return loss_forward_backward_ref(loss_, act[out].data(), b, x, sh[out].size(), sh[out].last(), nullptr);
}

}  // namespace dlb::models
