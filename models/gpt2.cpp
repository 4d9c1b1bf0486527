// GPT-2 (see gpt2.h): its graph from the sequence layers, and llm.c's tensors to and from it.
#include "models/gpt2.h"

#include <algorithm>

#include "kernels/common/errors.h"
#include "models/layers.h"

namespace dlb::models {

namespace {

bool stacked(Gpt2Tensor t) { return t != kWte && t != kWpe && t != kLnfw && t != kLnfb; }

// Hugging Face's key of llm.c tensor t at layer l.
std::string param_name(Gpt2Tensor t, int l) {
  static const char* const kNames[kGpt2Tensors] = {
      "wte.weight",        "wpe.weight",      "ln_1.weight",        "ln_1.bias",
      "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
      "ln_2.weight",       "ln_2.bias",       "mlp.c_fc.weight",    "mlp.c_fc.bias",
      "mlp.c_proj.weight", "mlp.c_proj.bias", "ln_f.weight",        "ln_f.bias"};
  return stacked(t) ? "h." + std::to_string(l) + "." + kNames[t] : kNames[t];
}

}  // namespace

std::unique_ptr<Model> make_gpt2(const Gpt2Weights& w, int seq) {
  const Gpt2Config& c = w.config;
  c.check(c.name);
  if (seq <= 0 || seq > c.max_seq_len)
    throw InputError(c.name + ": sequence length " + std::to_string(seq) + " outside 1.." + std::to_string(c.max_seq_len));
  const int C = c.channels;
  auto m = std::make_unique<Model>("gpt2", Shape{1, seq}, LossKind::cross_entropy, true);
  auto wte = std::make_unique<Embedding>("wte", c.padded_vocab_size, C);
  Embedding* table = wte.get();
  int x = m->node<PositionEmbedding>({m->node(std::move(wte), {0})}, "wpe", c.max_seq_len, C);
  MultiheadAttention::Options core;
  core.causal = true, core.projections = false;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const int first = int(m->nodes().size());
    int a = m->node<LayerNorm>({x}, p + "ln_1", C);
    a = m->node<Linear>({a}, p + "attn.c_attn", C, 3 * C);
    a = m->node<MultiheadAttention>({a}, p + "attn", C, c.num_heads, core);
    x = m->node<Add>({x, m->node<Linear>({a}, p + "attn.c_proj", C, C)});
    int h = m->node<LayerNorm>({x}, p + "ln_2", C);
    h = m->node<GELU>({m->node<Linear>({h}, p + "mlp.c_fc", C, 4 * C)});
    x = m->node<Add>({x, m->node<Linear>({h}, p + "mlp.c_proj", 4 * C, C)});
    m->add_checkpoint_segment(first, int(m->nodes().size()));  // --checkpoint-activations: per block
  }
  x = m->node<LayerNorm>({x}, "ln_f", C);
  m->node<TiedLMHead>({x}, table, c.vocab_size);
  gpt2_import(*m, w);
  return m;
}

Param& gpt2_param(Model& m, Gpt2Tensor t, int layer) {
  const std::string name = param_name(t, layer);
  for (Param* p : m.params())
    if (p->name == name) return *p;
  throw UsageError("gpt2: the model has no parameter " + name);
}

namespace {

// Each llm.c tensor (each layer's slice of a stacked one) against its parameter.
template <class F>
void for_each_slice(Model& m, const Gpt2Config& c, F f) {
  const auto info = gpt2_tensors(c);
  for (int t = 0; t < kGpt2Tensors; ++t) {
    const auto tt = Gpt2Tensor(t);
    const int layers = stacked(tt) ? c.num_layers : 1;
    const std::size_t per = info[std::size_t(t)].size / std::size_t(layers);
    for (int l = 0; l < layers; ++l) {
      Param& p = gpt2_param(m, tt, l);
      if (p.size() != per) throw UsageError("gpt2: " + p.name + " holds " + std::to_string(p.size()) + " values, llm.c's " + std::to_string(per));
      f(p, info[std::size_t(t)].offset + std::size_t(l) * per);
    }
  }
}

}  // namespace

Gpt2Weights gpt2_export(Model& m, const Gpt2Config& c, bool grads) {
  Gpt2Weights w;
  w.config = c;
  w.data.assign(c.num_params(), 0.f);
  for_each_slice(m, c, [&](Param& p, std::size_t off) {
    const auto& src = grads ? p.grad : p.value;
    std::copy(src.begin(), src.end(), w.data.begin() + std::ptrdiff_t(off));
  });
  return w;
}

void gpt2_import(Model& m, const Gpt2Weights& w) {
  for_each_slice(m, w.config, [&](Param& p, std::size_t off) {
    std::copy_n(w.data.begin() + std::ptrdiff_t(off), p.size(), p.value.begin());
  });
}

OptimizerConfig gpt2_optimizer() {
  OptimizerConfig o;
  o.kind = "adamw", o.lr = 1e-4f, o.beta1 = 0.9f, o.beta2 = 0.999f, o.eps = 1e-8f, o.weight_decay = 0.f;
  return o;
}

double gpt2_flops_per_token(const Gpt2Config& c, int seq) {
  const double C = c.channels, L = c.num_layers;
  const double n = L * 12.0 * C * C + double(c.vocab_size) * C;  // the matmul weights (biases aside)
  return 6.0 * n + 6.0 * L * seq * C;
}

Gpt2Batcher::Gpt2Batcher(std::vector<std::uint16_t> tokens, int B, int T) : tokens_(std::move(tokens)), B_(B), T_(T) {
  if (B <= 0 || T <= 0) throw UsageError("gpt2 batches: B and T must be positive");
  const std::size_t need = std::size_t(B) * T + 1;
  if (tokens_.size() < need)
    throw UsageError("gpt2 batches: " + std::to_string(tokens_.size()) + " tokens, a batch of " + std::to_string(B) +
                     " x " + std::to_string(T) + " needs " + std::to_string(need));
  x_.resize(need - 1), y_.resize(need - 1);
}

const Batch& Gpt2Batcher::next() {
  const std::size_t n = x_.size();
  if (pos_ + n + 1 > tokens_.size()) pos_ = 0;
  for (std::size_t i = 0; i < n; ++i) x_[i] = tokens_[pos_ + i], y_[i] = tokens_[pos_ + i + 1];
  pos_ += n;
  inputs_[0] = x_.data();
  b_ = Batch{};
  b_.n = B_, b_.labels = y_.data(), b_.inputs = inputs_;
  return b_;
}

}  // namespace dlb::models
