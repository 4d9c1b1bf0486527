// The sequence models (see seq_zoo.h): their graphs, sizes and batches.
#include "models/seq_zoo.h"

#include <algorithm>

#include "kernels/common/errors.h"

namespace dlb::models {

namespace cs = cpu::seq;

const std::vector<std::string>& seq_model_names() {
  static const std::vector<std::string> v{"rnn", "lstm", "transformer"};
  return v;
}

bool is_seq_model(const std::string& name) {
  const auto& v = seq_model_names();
  return std::find(v.begin(), v.end(), name) != v.end();
}

SeqConfig SeqConfig::defaults(const std::string& model) {
  if (!is_seq_model(model)) throw UsageError("model '" + model + "': not a sequence model (rnn, lstm, transformer)");
  SeqConfig c;
  c.model = model;
  c.layers = model == "rnn" ? 1 : 2;
  return c;
}

void SeqConfig::check() const {
  auto positive = [&](int v, const char* what) {
    if (v <= 0) throw InputError(model + ": " + what + " " + std::to_string(v) + " must be positive");
  };
  if (seq <= 0 || seq > kMaxSeq)
    throw InputError(model + ": sequence length " + std::to_string(seq) + " outside 1.." + std::to_string(kMaxSeq));
  if (vocab < 2 || vocab > kMaxVocab)
    throw InputError(model + ": vocabulary " + std::to_string(vocab) + " outside 2.." + std::to_string(kMaxVocab));
  positive(layers, "layers");
  if (model == "transformer") {
    positive(d_model, "d_model"), positive(heads, "heads"), positive(ff, "dim_feedforward");
    if (d_model % heads)
      throw InputError("transformer: d_model " + std::to_string(d_model) + " is not a multiple of the " +
                       std::to_string(heads) + " heads");
  } else {
    positive(emb, "embedding size"), positive(hidden, "hidden size");
    if (model == "rnn" && classes < 2) throw InputError("rnn: classes " + std::to_string(classes) + " must be >= 2");
  }
}

namespace {

// nn.TransformerEncoderLayer / DecoderLayer (post-norm: x = norm(x + dropout(sublayer(x)))), their
// modules named as in nn.Transformer's state_dict.
struct Blocks {
  Model& m;
  const SeqConfig& c;
  std::uint64_t stream = 0;  // each Dropout and attention its own Philox stream

  int dropout(int x) { return c.dropout > 0 ? m.node<Dropout>({x}, c.dropout, ++stream) : x; }
  int residual_norm(const std::string& name, int x, int sub) {
    return m.node<LayerNorm>({m.node<Add>({x, dropout(sub)})}, name, c.d_model);
  }
  int attention(const std::string& name, std::vector<int> in, bool cross, bool causal) {
    MultiheadAttention::Options o;
    o.cross = cross, o.causal = causal, o.dropout = c.dropout, o.stream = ++stream, o.xavier_out = true;
    return m.node<MultiheadAttention>(std::move(in), name, c.d_model, c.heads, o);
  }
  int linear(const std::string& name, int x, int in_f, int out_f) {
    auto l = std::make_unique<Linear>(name, in_f, out_f);
    l->xavier = true;
    return m.node(std::move(l), {x});
  }
  int feed_forward(const std::string& p, int x) {
    const int h = dropout(m.node<ReLU>({linear(p + "linear1", x, c.d_model, c.ff)}));
    return linear(p + "linear2", h, c.ff, c.d_model);
  }
  int encoder_layer(const std::string& p, int x) {
    x = residual_norm(p + "norm1", x, attention(p + "self_attn", {x}, false, false));
    return residual_norm(p + "norm2", x, feed_forward(p, x));
  }
  int decoder_layer(const std::string& p, int y, int memory) {
    y = residual_norm(p + "norm1", y, attention(p + "self_attn", {y}, false, c.causal));
    y = residual_norm(p + "norm2", y, attention(p + "multihead_attn", {y, memory}, true, false));
    return residual_norm(p + "norm3", y, feed_forward(p, y));
  }
};

std::unique_ptr<Model> make_transformer(const SeqConfig& c) {
  auto m = std::make_unique<Model>("transformer", Shape{1, c.seq}, LossKind::cross_entropy, true);
  const int tgt_ids = m->add_input({1, c.seq}, true);
  auto emb = std::make_unique<Embedding>("embedding", c.vocab, c.d_model);
  Embedding* table = emb.get();
  const int src = m->node<PositionalEncoding>({m->node(std::move(emb), {0})}, c.d_model, c.seq);
  const int tgt = m->node<PositionalEncoding>({m->node(std::make_unique<Embedding>(table), {tgt_ids})}, c.d_model, c.seq);
  Blocks b{*m, c};
  int x = src;
  for (int l = 0; l < c.layers; ++l) x = b.encoder_layer("transformer.encoder.layers." + std::to_string(l) + ".", x);
  const int memory = m->node<LayerNorm>({x}, "transformer.encoder.norm", c.d_model);
  int y = tgt;
  for (int l = 0; l < c.layers; ++l)
    y = b.decoder_layer("transformer.decoder.layers." + std::to_string(l) + ".", y, memory);
  y = m->node<LayerNorm>({y}, "transformer.decoder.norm", c.d_model);
  m->node<Linear>({y}, "fc", c.d_model, c.vocab);
  return m;
}

std::unique_ptr<Model> make_recurrent(const SeqConfig& c) {
  const bool lstm = c.model == "lstm";
  auto m = std::make_unique<Model>(c.model, Shape{1, c.seq}, LossKind::cross_entropy, true);
  const int e = m->node<Embedding>({0}, "embedding", c.vocab, c.emb);
  std::vector<int> in{e};
  if (lstm) in.push_back(m->add_input({1, c.layers, c.hidden})), in.push_back(m->add_input({1, c.layers, c.hidden}));
  // rnn: sequence-first (time-major tokens), one layer; lstm: batch_first, h0 and c0 given
  auto r = std::make_unique<Recurrent>(c.model, lstm ? cs::RnnCell::lstm : cs::RnnCell::tanh, c.emb, c.hidden, c.layers,
                                       lstm, lstm);
  r->impl = c.impl;
  const int y = m->node(std::move(r), in);
  m->node<Linear>({m->node<SelectStep>({y}, -1, !lstm)}, "fc", c.hidden, lstm ? c.vocab : c.classes);
  return m;
}

}  // namespace

std::unique_ptr<Model> make_seq_model(const SeqConfig& c) {
  c.check();
  if (c.model == "transformer") return make_transformer(c);
  if (c.model == "rnn" && c.layers != 1) throw InputError("rnn: the seed's RNNClassifier has one layer");
  return make_recurrent(c);
}

const Batch& SeqBatcher::gather(const TokenData& d, const std::vector<std::uint32_t>& idx, std::size_t first, int n) {
  const int T = c_.seq;
  if (d.seq != T) throw UsageError("SeqBatcher: data windows of " + std::to_string(d.seq) + ", model seq " + std::to_string(T));
  src_.resize(std::size_t(n) * T);
  labels_.resize(std::size_t(n) * c_.labels_per_sample());
  const bool time_major = c_.model == "rnn", transformer = c_.model == "transformer";
  if (transformer) tgt_.resize(src_.size());
  for (int b = 0; b < n; ++b) {
    const std::size_t s = idx[first + std::size_t(b)];
    const std::int32_t* w = d.window(s);
    for (int t = 0; t < T; ++t) src_[time_major ? std::size_t(t) * n + b : std::size_t(b) * T + t] = w[t];
    if (transformer) {
      std::copy_n(w, T, tgt_.data() + std::size_t(b) * T);
      std::copy_n(w + 1, T, labels_.data() + std::size_t(b) * T);
    } else {
      labels_[std::size_t(b)] = d.classes > 0 ? d.labels[s] : w[T];
    }
  }
  inputs_[0] = src_.data();
  if (transformer) inputs_[1] = tgt_.data();
  if (c_.model == "lstm") {
    h0_.assign(std::size_t(n) * c_.layers * c_.hidden, 0.f);
    inputs_[1] = inputs_[2] = h0_.data();
  }
  b_ = Batch{};
  b_.n = n, b_.labels = labels_.data(), b_.inputs = inputs_;
  return b_;
}

TokenData seq_data(SeqConfig& c, const std::string& spec, std::size_t samples, std::uint64_t seed, bool vocab_given) {
  if (spec == "synthetic") return synthetic_tokens(c.vocab, c.seq, c.model == "rnn" ? c.classes : 0, samples, seed);
  if (spec.rfind("text:", 0) != 0)
    throw UsageError("--dataset '" + spec + "': sequence models take synthetic or text:FILE");
  TokenData d = text_tokens(spec.substr(5), c.seq, vocab_given ? c.vocab : kMaxVocab, samples, seed);
  if (!vocab_given) c.vocab = std::max(2, d.vocab);
  d.vocab = c.vocab;
  if (c.model == "rnn") c.classes = c.vocab;  // the next character
  return d;
}

}  // namespace dlb::models
