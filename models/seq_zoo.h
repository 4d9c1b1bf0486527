// The seed's sequence models (seed 002), PyTorch's modules and defaults, with their data:
//   rnn          RNNClassifier: Embedding(vocab, emb) -> nn.RNN(emb, hidden) (tanh, one layer,
//                sequence-first: tokens [seq, n] as the seed feeds them) -> the last hidden state ->
//                Linear(hidden, classes); cross-entropy.
//   lstm         LSTMGenerator: Embedding -> nn.LSTM(emb, hidden, layers, batch_first=True) with h0, c0
//                (zeros, model inputs 1 and 2) -> Linear(hidden, vocab) on the last step; the next token.
//   transformer  TransformerLM: Embedding + sinusoidal positional encoding of src and tgt (one table)
//                -> nn.Transformer(d_model, heads, layers encoder + layers decoder, dim_feedforward
//                2048, dropout 0.1, ReLU, post-norm, the encoder's and decoder's final LayerNorm) ->
//                Linear(d_model, vocab) at every target position; transformer(src, tgt) without masks
//                as the seed calls it, or with the decoder's causal mask (mask=causal).
// Our transformer keeps its activations batch-first ([n, seq, d]); nn.Transformer's default
// sequence-first layout is the same arithmetic on the transposed tensors (the PyTorch peer feeds
// [seq, n]). Parameter names are the modules' state_dict keys.
//
// Default sizes (a laptop trains a case in seconds; each is an axis): vocab 128, seq 32; rnn and lstm
// emb 64, hidden 128 (lstm 2 layers, rnn 4 classes); transformer d_model 128, 4 heads, 2 + 2 layers.
// Optimizer: Adam(1e-3), as the seed's other models (default_optimizer).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/seq_data.h"

namespace dlb::models {

constexpr int kMaxSeq = 4096;      // the longest sequence any of them takes (the positional table's length)
constexpr int kMaxVocab = 1 << 16;

struct SeqConfig {
  std::string model;  // rnn | lstm | transformer
  int vocab = 128, seq = 32;
  int emb = 64, hidden = 128, layers = 1, classes = 4;  // rnn, lstm
  int d_model = 128, heads = 4, ff = 2048;              // transformer (layers: encoder and decoder each)
  float dropout = 0.1f;  // the transformer's; 0 for the PyTorch parity check
  bool causal = false;   // the transformer's decoder self-attention mask
  RnnImpl impl = RnnImpl::ours;  // rnn, lstm: our kernels or oneDNN's
  // The seed's sizes for `model` (UsageError for an unknown name).
  static SeqConfig defaults(const std::string& model);
  // InputError (one line) for sizes that do not fit: seq outside 1..kMaxSeq, vocab outside
  // 2..kMaxVocab, d_model not a multiple of heads, a size not positive.
  void check() const;
  // Labels per sample: 1 (rnn, lstm) or seq (transformer); classes of the output.
  int labels_per_sample() const { return model == "transformer" ? seq : 1; }
  int out_classes() const { return model == "rnn" ? classes : vocab; }
  // Tokens a sample feeds the model (throughput: tokens/s): seq (transformer: src and tgt, counted once).
  int tokens_per_sample() const { return seq; }
};

bool is_seq_model(const std::string& name);
const std::vector<std::string>& seq_model_names();  // rnn, lstm, transformer
std::unique_ptr<Model> make_seq_model(const SeqConfig& c);

// A model's batch from samples of a TokenData, in the layout its inputs take (rnn: time-major
// tokens; lstm: tokens, zero h0 and c0; transformer: src and tgt), with its labels (rnn: the
// sample's class, or its next token for text; lstm: the next token; transformer: the next token at
// every position). Buffers are kept between calls.
class SeqBatcher {
 public:
  explicit SeqBatcher(const SeqConfig& c) : c_(c) {}
  const Batch& gather(const TokenData& d, const std::vector<std::uint32_t>& idx, std::size_t first, int n);
  const Batch& batch() const { return b_; }

 private:
  SeqConfig c_;
  std::vector<std::int32_t> src_, tgt_, labels_;
  std::vector<float> h0_;  // zeros: h0 and c0
  const void* inputs_[3] = {};
  Batch b_;
};

// Data for a model: synthetic (`spec` "synthetic": `samples` seeded windows with learnable structure)
// or "text:FILE" (character-level windows of a local UTF-8 file: c.vocab becomes its alphabet's size,
// or stays as given when `vocab_given` and the alphabet fits in it; the rnn classifies the next
// character, c.classes = c.vocab); InputError for a bad file, UsageError for another spec.
TokenData seq_data(SeqConfig& c, const std::string& spec, std::size_t samples, std::uint64_t seed,
                   bool vocab_given = false);

}  // namespace dlb::models
