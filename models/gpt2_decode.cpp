// GPT-2 inference with a K/V cache (see gpt2_decode.h).
#include "models/gpt2_decode.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/softmax.h"
#include "models/gpt2.h"
#include "models/layers.h"

namespace dlb::models {

namespace {

// Node k of the model as layer type L, or UsageError (not a make_gpt2 graph).
template <class L>
L* node_as(Model& m, std::size_t k) {
  auto* l = k < m.nodes().size() ? dynamic_cast<L*>(m.nodes()[k].layer.get()) : nullptr;
  if (!l) throw UsageError("gpt2 decoder: model " + m.name() + "'s node " + std::to_string(k) + " is not make_gpt2's");
  return l;
}

void run(Layer* l, const Shape& in, const float* x, float* y) {
  const void* xs[1] = {x};
  l->forward(Fwd<float>{Shapes(in), xs, y});
}

}  // namespace

Gpt2Nodes gpt2_nodes(Model& m, const Gpt2Config& c) {
  // make_gpt2's nodes: wte, wpe, then per block ln_1, c_attn, attn, c_proj, add, ln_2, c_fc, gelu,
  // mlp.c_proj, add; then ln_f and the head.
  Gpt2Nodes g;
  g.wte = &gpt2_param(m, kWte, 0);
  g.wpe = &gpt2_param(m, kWpe, 0);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::size_t b = 2 + 10 * std::size_t(l);
    g.blocks.push_back({node_as<LayerNorm>(m, b), node_as<Linear>(m, b + 1), node_as<Linear>(m, b + 3),
                        node_as<LayerNorm>(m, b + 5), node_as<Linear>(m, b + 6), node_as<GELU>(m, b + 7),
                        node_as<Linear>(m, b + 8)});
  }
  g.lnf = node_as<LayerNorm>(m, 2 + 10 * std::size_t(c.num_layers));
  g.head = node_as<TiedLMHead>(m, 3 + 10 * std::size_t(c.num_layers));
  return g;
}

void check_decoder_length(const Gpt2Config& c, int max_len) {
  c.check(c.name);
  if (max_len <= 0 || max_len > c.max_seq_len)
    throw InputError(c.name + ": decoder length " + std::to_string(max_len) + " outside 1.." + std::to_string(c.max_seq_len));
}

void check_feed(const Gpt2Config& c, const std::int32_t* tokens, int n, int pos, int max_len) {
  if (n <= 0 || pos + n > max_len)
    throw UsageError("gpt2 decoder: " + std::to_string(n) + " tokens at position " + std::to_string(pos) + " past its " +
                     std::to_string(max_len));
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw UsageError("gpt2 decoder: token " + std::to_string(tokens[i]) + " outside the vocabulary of " +
                       std::to_string(c.vocab_size));
}

std::unique_ptr<KvDecoder> make_gpt2_decoder(Model& m, const Gpt2Config& c, int max_len, const std::string& device) {
  if (device == "cpu") return std::make_unique<Gpt2Decoder>(m, c, max_len);
#ifdef DLB_HAVE_CUDA
  return make_gpu_gpt2_decoder(m, c, max_len, device);
#else
  throw Unsupported("gpt2 decoder on " + device + ": this build has no CUDA");
#endif
}

Gpt2Decoder::Gpt2Decoder(Model& m, const Gpt2Config& c, int max_len) : c_(c), max_len_(max_len) {
  check_decoder_length(c, max_len);
  g_ = gpt2_nodes(m, c);
  const std::size_t cache = std::size_t(c.num_layers) * std::size_t(max_len) * std::size_t(c.channels);
  k_.assign(cache, 0.f), v_.assign(cache, 0.f);
}

// y = x W^T + b for n rows: the model's Linear (sgemm), or one sgemv when n is 1 (sgemm at one row
// packs the whole weight first: twice the memory traffic of the read sgemv does).
void Gpt2Decoder::linear(Linear* l, const float* x, float* y, int n) {
  if (n > 1) return run(l, Shape{1, n, l->in_f}, x, y);
  std::copy_n(l->bias.value.data(), l->out_f, y);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, l->out_f, l->in_f, 1.f, l->weight.value.data(), l->in_f, x, 1, 1.f, y, 1);
}

void Gpt2Decoder::attend(int layer, int n) {
  const int C = c_.channels, H = c_.num_heads, D = C / H, T = pos_ + n;
  float* K = k_.data() + std::size_t(layer) * std::size_t(max_len_) * std::size_t(C);
  float* V = v_.data() + std::size_t(layer) * std::size_t(max_len_) * std::size_t(C);
  for (int i = 0; i < n; ++i) {  // c_attn's rows are [q | k | v]
    const float* r = qkv_.data() + std::size_t(i) * 3 * C;
    std::copy_n(r + C, C, K + std::size_t(pos_ + i) * C);
    std::copy_n(r + 2 * C, C, V + std::size_t(pos_ + i) * C);
  }
  s_.resize(std::size_t(n) * T);
  const float scale = 1.f / std::sqrt(float(D));
  for (int h = 0; h < H; ++h) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, T, D, scale, qkv_.data() + h * D, 3 * C, K + h * D, C, 0.f,
                s_.data(), T);
    for (int i = 0; i < n; ++i) {  // row i (position pos + i) sees positions 0..pos + i
      float* row = s_.data() + std::size_t(i) * T;
      cpu::seq::softmax_forward(row, row, 1, pos_ + i + 1);
      std::fill(row + pos_ + i + 1, row + T, 0.f);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, T, 1.f, s_.data(), T, V + h * D, C, 0.f,
                att_.data() + h * D, C);
  }
}

void Gpt2Decoder::feed(const std::int32_t* tokens, int n, bool all_logits) {
  check_feed(c_, tokens, n, pos_, max_len_);
  const int C = c_.channels, Vv = c_.vocab_size;
  const auto rows = std::size_t(n) * C;
  x_.resize(rows), h_.resize(rows), att_.resize(rows), qkv_.resize(3 * rows), fc_.resize(4 * rows);
  const float *wte = g_.wte->value.data(), *wpe = g_.wpe->value.data();
  for (int i = 0; i < n; ++i) {  // wte[token] + wpe[position]
    const float* e = wte + std::size_t(tokens[i]) * C;
    const float* p = wpe + std::size_t(pos_ + i) * C;
    for (int j = 0; j < C; ++j) x_[std::size_t(i) * C + j] = e[j] + p[j];
  }
  const Shape rc{1, n, C};
  for (int l = 0; l < c_.num_layers; ++l) {
    const Gpt2Nodes::Block& b = g_.blocks[std::size_t(l)];
    run(b.ln1, rc, x_.data(), h_.data());
    linear(b.qkv, h_.data(), qkv_.data(), n);
    attend(l, n);
    linear(b.proj, att_.data(), h_.data(), n);
    for (std::size_t j = 0; j < rows; ++j) x_[j] += h_[j];
    run(b.ln2, rc, x_.data(), h_.data());
    linear(b.fc, h_.data(), fc_.data(), n);
    run(b.gelu, Shape{1, n, 4 * C}, fc_.data(), fc_.data());
    linear(b.fcproj, fc_.data(), h_.data(), n);
    for (std::size_t j = 0; j < rows; ++j) x_[j] += h_[j];
  }
  pos_ += n;
  const int from = all_logits ? 0 : n - 1, m = n - from;  // the rows whose logits are wanted
  run(g_.lnf, Shape{1, m, C}, x_.data() + std::size_t(from) * C, h_.data());
  logits_.resize(std::size_t(m) * Vv);
  if (m == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, Vv, C, 1.f, wte, C, h_.data(), 1, 0.f, logits_.data(), 1);
  else run(g_.head, Shape{1, m, C}, h_.data(), logits_.data());
}

}  // namespace dlb::models
