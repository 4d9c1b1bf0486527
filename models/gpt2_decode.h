// GPT-2 inference at batch 1 with a per-layer K/V cache (the gpt2 suite's op=infer): prefill a
// prompt in one pass, then decode one token at a time, each step reading the cached keys and values
// of the positions before it instead of running the whole sequence again. It runs a gpt2 model's own
// layers (models/gpt2.h: LayerNorm, Linear, GELU, the tied head) on the new rows; only the attention
// is its own (the new queries against the cache, per head: S = Q K^T / sqrt(D), each row's softmax
// over the positions it sees, O = S V). A single new row (decode) takes sgemv instead of sgemm: the
// step is a read of every weight once (napkin, gpt2-124m: 124 M floats, ~0.5 GB per token, so
// memory-bound: ~20 ms a token at ~25 GB/s of one core's share).
#pragma once
#include <cstdint>
#include <vector>

#include "models/gpt2_files.h"
#include "models/model.h"

namespace dlb::models {

class Gpt2Decoder {
 public:
  // `m` a make_gpt2 model of config `c` (its parameters read, never written); the cache holds up to
  // `max_len` positions (<= c.max_seq_len: InputError otherwise).
  Gpt2Decoder(Model& m, const Gpt2Config& c, int max_len);
  // Appends n tokens at positions [position(), position() + n) (UsageError past max_len or a token
  // outside the vocabulary) and returns their logits, [n, V] row-major when `all_logits`, else the
  // last position's [V] only (prefill for generation needs just that one).
  const std::vector<float>& feed(const std::int32_t* tokens, int n, bool all_logits);
  int position() const { return pos_; }
  void reset() { pos_ = 0; }
  std::size_t cache_bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  struct Block {
    Layer *ln1, *qkv, *proj, *ln2, *fc, *gelu, *fcproj;
  };
  void linear(Layer* l, const float* x, float* y, int n, int in_f, int out_f);
  void attend(int layer, int n);  // qkv_ rows -> att_ rows, appending K, V to the cache

  Gpt2Config c_;
  int max_len_, pos_ = 0;
  const float *wte_, *wpe_;
  std::vector<Block> blocks_;
  Layer *lnf_, *head_;
  std::vector<float> k_, v_;  // [L, max_len, C]: each layer's keys and values, heads side by side
  std::vector<float> x_, h_, qkv_, att_, fc_, s_, logits_;
};

}  // namespace dlb::models
