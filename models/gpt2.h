// The gpt2 model family: GPT-2 as llm.c and the PyTorch peer (bench/peers/pytorch_gpt2.py) build it,
// from the sequence layers (models/layers/):
//   wte (Embedding [Vp, C]) + wpe (PositionEmbedding [maxT, C])
//   L x { x += c_proj(attn(c_attn(ln_1(x))));  x += mlp.c_proj(GELU(mlp.c_fc(ln_2(x)))) }   (pre-LN)
//   ln_f -> the LM head tied to wte (logits over the V real classes) -> cross-entropy at every position
// attn is our causal attention core (MultiheadAttention without projections: the fused flash kernel,
// kernels/cpu/seq/attention.h). Parameter names are Hugging Face's GPT-2 keys ("h.3.mlp.c_fc.weight",
// weights [out, in] as nn.Linear's). The weights come from an llm.c checkpoint or GPT-2's seeded
// init (models/gpt2_files.h); training is AdamW (llm.c's lr 1e-4, no decay), batches cut from a token
// stream as llm.c's loader does (x = tokens[p, p + B T), y = the same shifted by one).
// FLOPs per token of a training step (napkin, PaLM's MFU count): 6 N (N the non-embedding weights +
// the LM head's V C) + 6 L T C (the causal attention's QK^T and PV, forward and backward: 12 L T C
// for full attention, halved).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/gpt2_files.h"
#include "models/model.h"
#include "models/net.h"

namespace dlb::models {

// Each block is a checkpoint segment (Model::set_checkpointing(true): only the blocks' inputs are
// kept from forward to backward, each block's forward runs again in backward, as
// torch.utils.checkpoint per block; napkin: a block makes 18 B T C floats of values + as many
// gradients, 17 of them then shared by all blocks, for one more forward of the blocks: ~+1/3 of
// their FLOPs).
// The model for sequences of `seq` tokens (seq <= max_seq_len: InputError otherwise), its weights
// `w` (w.config's shape).
std::unique_ptr<Model> make_gpt2(const Gpt2Weights& w, int seq);

// The model's parameter for llm.c tensor `t` of layer `layer` (0 for the unstacked ones).
Param& gpt2_param(Model& m, Gpt2Tensor t, int layer);
// The model's values (or gradients, `grads`) as llm.c's 16 tensors.
Gpt2Weights gpt2_export(Model& m, const Gpt2Config& c, bool grads);
// llm.c's tensors into the model's values.
void gpt2_import(Model& m, const Gpt2Weights& w);

// llm.c's defaults: AdamW lr 1e-4, betas 0.9 / 0.999, eps 1e-8, no weight decay.
OptimizerConfig gpt2_optimizer();

// Training FLOPs per token (the napkin count above) for sequences of `seq`.
double gpt2_flops_per_token(const Gpt2Config& c, int seq);

// Batches of B x T from a token stream, as llm.c's DataLoader cuts them: batch k reads tokens
// [k B T, (k + 1) B T] (wrapping to the start when the stream runs out).
class Gpt2Batcher {
 public:
  Gpt2Batcher(std::vector<std::uint16_t> tokens, int B, int T);  // UsageError: fewer than B T + 1 tokens
  const Batch& next();
  const Batch& batch() const { return b_; }
  void rewind() { pos_ = 0; }

 private:
  std::vector<std::uint16_t> tokens_;
  int B_, T_;
  std::size_t pos_ = 0;
  std::vector<std::int32_t> x_, y_;
  const void* inputs_[1] = {};
  Batch b_;
};

}  // namespace dlb::models
