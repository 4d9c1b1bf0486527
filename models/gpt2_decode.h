// GPT-2 inference at batch 1 with a per-layer K/V cache (the gpt2 suite's op=infer): prefill a
// prompt in one pass, then decode one token at a time, each step reading the cached keys and values
// of the positions before it instead of running the whole sequence again. It runs a gpt2 model's own
// layers (models/gpt2.h: LayerNorm, Linear, GELU, the tied head) on the new rows; only the attention
// is its own (the new queries against the cache, per head: S = Q K^T / sqrt(D), each row's softmax
// over the positions it sees, O = S V). A single new row (decode) takes sgemv instead of sgemm: the
// step is a read of every weight once (napkin, gpt2-124m: 124 M floats, ~0.5 GB per token, so
// memory-bound: ~20 ms a token at ~25 GB/s of one core's share).
// The GPU twin (models/cuda/gpu_gpt2_decode.cu) runs the same steps on the device; make_gpt2_decoder
// picks by device.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/gpt2_files.h"
#include "models/model.h"

namespace dlb::models {

class LayerNorm;
class Linear;
class GELU;
class TiedLMHead;

// The nodes of a make_gpt2 graph that the decoders run (UsageError for any other graph).
struct Gpt2Nodes {
  struct Block {
    LayerNorm* ln1;
    Linear* qkv;  // c_attn: rows [q | k | v]
    Linear* proj;
    LayerNorm* ln2;
    Linear* fc;
    GELU* gelu;
    Linear* fcproj;
  };
  Param *wte, *wpe;
  std::vector<Block> blocks;
  LayerNorm* lnf;
  TiedLMHead* head;
};
Gpt2Nodes gpt2_nodes(Model& m, const Gpt2Config& c);

class KvDecoder {
 public:
  virtual ~KvDecoder() = default;
  // Appends n tokens at positions [position(), position() + n) (UsageError past the cache's length or
  // a token outside the vocabulary) and computes their logits: all n rows when `all_logits`, else the
  // last position's only (prefill for generation needs just that one). Returns when they are ready
  // (a GPU decoder waits for its device; the logits stay there until logits()).
  virtual void feed(const std::int32_t* tokens, int n, bool all_logits) = 0;
  // The last feed's logits on the host, [rows, V] row-major.
  virtual const std::vector<float>& logits() = 0;
  virtual int position() const = 0;
  virtual void reset() = 0;
  virtual std::size_t cache_bytes() const = 0;
};

// `m` a make_gpt2 model of config `c` (its parameters read, never written; the GPU decoder copies
// them once); the cache holds up to `max_len` positions (<= c.max_seq_len: InputError otherwise).
// device "cpu" or "cuda:N" (Unsupported in a build without CUDA).
std::unique_ptr<KvDecoder> make_gpt2_decoder(Model& m, const Gpt2Config& c, int max_len, const std::string& device);

// Both decoders' checks: InputError for a cache length outside 1..max_seq_len; UsageError for a feed
// of no tokens, one past the cache or a token outside the vocabulary.
void check_decoder_length(const Gpt2Config& c, int max_len);
void check_feed(const Gpt2Config& c, const std::int32_t* tokens, int n, int pos, int max_len);
#ifdef DLB_HAVE_CUDA
std::unique_ptr<KvDecoder> make_gpu_gpt2_decoder(Model& m, const Gpt2Config& c, int max_len, const std::string& device);
#endif

class Gpt2Decoder final : public KvDecoder {
 public:
  Gpt2Decoder(Model& m, const Gpt2Config& c, int max_len);
  void feed(const std::int32_t* tokens, int n, bool all_logits) override;
  const std::vector<float>& logits() override { return logits_; }
  int position() const override { return pos_; }
  void reset() override { pos_ = 0; }
  std::size_t cache_bytes() const override { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  void linear(Linear* l, const float* x, float* y, int n);
  void attend(int layer, int n);  // qkv_ rows -> att_ rows, appending K, V to the cache

  Gpt2Config c_;
  int max_len_, pos_ = 0;
  Gpt2Nodes g_;
  std::vector<float> k_, v_;  // [L, max_len, C]: each layer's keys and values, heads side by side
  std::vector<float> x_, h_, qkv_, att_, fc_, s_, logits_;
};

}  // namespace dlb::models
