// The CUDA trainer of the sequence models (models/seq_zoo.h: rnn, lstm, transformer; GPT-2,
// models/gpt2.h), beside the image trainer (gpu_trainer.cu), which hands it every model with a
// sequence op. See gpu_seq_trainer.cu. Ran on an H100 (2026-11-27).
#pragma once
#include <memory>

#include "models/trainer.h"

namespace dlb::models {

// Whether `m` has an op of the sequence models (models/cuda/gpu_seq_layers.h is_seq_op).
bool has_seq_ops(const Model& m);

// fp32, or o.dtype tf32 / bf16 / fp16: autocast of the GEMMs alone (gpu_seq_trainer.cu; fp16 with
// the loss scaler o.scaler on the device). UsageError for an optimizer other than sgd / adam / adamw;
// Unsupported for fp64, impl=cudnn under autocast, a CUDA graph, a layer without a device twin. With the model's checkpointing on,
// each segment's inner values are recomputed in backward instead of kept.
std::unique_ptr<Trainer> make_gpu_seq_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o);

}  // namespace dlb::models
