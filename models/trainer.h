// Training loops over a dataset, one per backend: the CPU trainer (models/trainer.cpp) and the CUDA
// trainer (models/cuda/gpu_trainer.cu). Both do what the lecture's train_model does: per batch,
// load (shuffled gather into a host batch buffer, like a DataLoader), move to the device, zero-grad,
// forward, loss, backward, optimizer step. The suites and `dlbench train` drive these.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/amp.h"
#include "models/data.h"
#include "models/net.h"
#include "models/profiler.h"

namespace dlb::models {

namespace loader {
class Loader;
}

// How a batch reaches the GPU (the seeds' input pipelines). CPU training ignores it.
enum class InputMode { pageable, pinned, prefetch, resident };
InputMode parse_input_mode(const std::string& s);  // UsageError on an unknown name
const char* input_mode_name(InputMode m);

struct TrainOptions {
  std::string device = "cpu";  // "cpu" or "cuda:N"
  InputMode input = InputMode::pageable;
  // CUDA graphs (models/cuda/graph_cache.h): the image trainer's step (zero-grad .. optimizer step),
  // and both GPU trainers' forward-only call (infer_batch); the sequence trainer trains eagerly.
  bool cuda_graph = false;
  // Autocast dtype (models/amp.h): fp32 (off), tf32 (fp32 tensors, TF32 tensor-core matmuls/convs),
  // fp16 (with the dynamic loss scaler) or bf16. The CUDA trainer runs all four; the CPU trainer
  // runs fp32 only (CPU bf16 training is models::AmpTrainer) and refuses the others.
  DType dtype = DType::fp32;
  GradScalerConfig scaler;  // fp16 only
  std::uint64_t shuffle_seed = 1;
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // What an epoch over `d` in batches of `batch` sets up before its first step, done ahead so a
  // benchmark can keep it out of its timing: the CUDA trainer uploads `d` (input resident), makes
  // the buffers of both batch shapes (full and the partial last) and runs cuDNN's algorithm search
  // for them. Changes no weights. Optional: train_epoch does the same itself when it was not called.
  virtual void prepare(const Dataset& d, int batch) { (void)d, (void)batch; }
  // One pass over `d` in batches of `batch` (the last one partial, as DataLoader(drop_last=False));
  // returns the mean loss over batches. Waits for the device before returning.
  virtual double train_epoch(const Dataset& d, int batch) = 0;
  // One epoch fed by the data loader (models/loader/loader.h): its batches, in its order, until it
  // ends the epoch; the mean loss over batches. Here: train_batch on each host batch. The CPU trainer
  // steps on each batch where the loader wrote it (no gather); the CUDA trainer takes them through a
  // DeviceFeed (copied on a stream of their own, non-blocking from pinned memory, overlapped with the
  // step). Waits for the device before returning.
  virtual double train_epoch(loader::Loader& l);
  // Fraction of `d` classified right (cross-entropy models) or the mean loss (MSE models).
  virtual double evaluate(const Dataset& d, int batch) = 0;
  // One training step (zero-grad, forward, loss, backward, optimizer) on a host batch with any inputs
  // (the sequence models' token ids); returns its loss. Dropout draws its masks for the optimizer's
  // step number. Waits for the device before returning.
  virtual float train_batch(const Batch& b) = 0;
  // Forward only, as a served request: the host batch's inputs (and labels) copied to the device
  // inside the call, forward in eval mode (dropout off), the output's loss; no backward, no
  // optimizer step, the weights unchanged. Waits for the device; returns the loss. For op=infer
  // latency (bench/seq_infer.cpp). Unsupported unless the trainer implements it.
  virtual float infer_batch(const Batch& b);
  // One forward + backward (no optimizer step) on a host batch; gradients come back to the host
  // model's Param::grad, the loss is returned. For verification against another path.
  virtual float gradients(const Batch& b) = 0;
  // Copy the device's parameters back into the host model (no-op on the CPU).
  virtual void sync_to_host() {}
  // Device bytes (our tracked allocations) after the model moved there, and the peak since then.
  virtual std::size_t model_device_bytes() const { return 0; }
  virtual std::size_t peak_device_bytes() const { return 0; }
  // The loss scaler's current scale (1 when the run does not scale: fp32, tf32, bf16, the CPU).
  virtual float loss_scale() { return 1.0f; }
  // --profile: one training step on the first `batch` images of `d` (in order), each part reported to
  // `p`: "step" around data copy, zero_grad, forward (a region per layer), loss, backward (a region
  // per layer), optimizer and, on a GPU, the final synchronisation. Untimed; it updates the weights
  // like any step. Returns the step's loss.
  virtual float profile_step(const Dataset& d, int batch, Profiler& p);
  // --profile of the token models on a GPU: gradients(b) (no optimizer step: the weights stay) with a
  // region per part: "data copy", "zero_grad", "forward <layer>" (and, under checkpointing, its
  // recompute), "loss", "backward <layer>", "sync". Returns the loss; the gradients come back to the
  // host model as gradients() leaves them. Unsupported by default.
  virtual float profile_gradients(const Batch& b, Profiler& p);
  virtual std::string describe() const = 0;  // "cpu (OpenBLAS, 2 threads)", "cuda:0 (pinned, graph)"
};

// `model` must outlive the trainer; the trainer owns the optimizer state.
std::unique_ptr<Trainer> make_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o);

// The host model's eval-mode forward (dropout off) on `b` and its output's loss (fp32): what
// infer_batch computes, the reference of the GPU trainers' infer_batch.
float forward_loss(Model& m, const Batch& b);

// Unsupported when the loader's images are not the model's input shape (the loader has no resize).
void check_loader(const Model& m, const loader::Loader& l);

// Host helper: gather the images (and labels) of `idx[first .. first+n)` into contiguous buffers.
void gather_batch(const Dataset& d, const std::vector<std::uint32_t>& idx, std::size_t first, int n, float* x,
                  std::int32_t* y);
// The epoch's order: a seeded permutation of [0, size).
std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed);

#ifdef DLB_HAVE_CUDA
std::unique_ptr<Trainer> make_gpu_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o);
#endif

}  // namespace dlb::models
