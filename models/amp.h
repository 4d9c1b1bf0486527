// Mixed precision (AMP), the pieces every backend shares:
//  - the autocast policy, PyTorch's: matrix products (conv, linear, matmul) run in the half type
//    with fp32 accumulation; softmax, log-softmax, losses and reductions in fp32; ReLU, pooling and
//    other elementwise ops in their input's type; master weights and the optimizer stay fp32;
//  - the dynamic loss scaler, PyTorch GradScaler's defaults and behaviour;
//  - which dtypes a device can run (CPU: fp32 and bf16 only, like PyTorch's CPU autocast).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "models/plan.h"

namespace dlb::models {

// ---- autocast policy ----

enum class CastKind {
  lower_precision,  // run in the autocast dtype (fp16/bf16; tf32 for fp32 matmuls), accumulate in fp32
  fp32,             // always fp32 (numerically sensitive: exp/log, softmax, losses, reductions)
  input_type,       // run in the dtype of the input, no cast (relu, pooling, elementwise, views)
  promote,          // run in the widest dtype among the inputs (cat, stack, addcmul, ...)
};
const char* cast_kind_name(CastKind k);

struct OpCast {
  const char* op;  // PyTorch's op name: "conv2d", "linear", "softmax", "cross_entropy", ...
  CastKind kind;
};
// The whole table (op name -> kind); the unit tests and `dlbench` docs read it.
const std::vector<OpCast>& autocast_table();
// Kind of `op`; throws std::invalid_argument for an op the table does not know.
CastKind cast_kind(const std::string& op);

struct CastPolicy {
  CastKind kind;
  DType compute;     // dtype of the op's inputs/math
  DType accumulate;  // dtype of its sums (fp32 for every half-type matmul)
  DType output;      // dtype of its result tensor
};
// What `op` does under autocast to `autocast_dtype` (fp32 = autocast off; tf32 = fp32 tensors with
// TF32 tensor-core matmuls/convs) for an input of dtype `input` (for input_type/promote ops: the
// widest input). Optimizer updates ("sgd", "adam") and master weights are always fp32.
CastPolicy cast_policy(const std::string& op, DType autocast_dtype, DType input = DType::fp32);

// Dtypes a device runs: every one on CUDA; fp32 and bf16 on the CPU (no fp16/tf32 units there,
// as in PyTorch's CPU autocast). `gpu` false = CPU.
bool dtype_supported(DType t, bool gpu);
// Throws dlb::UsageError("--dtype fp16: ...") when `t` cannot run on that device.
void check_dtype_for_device(DType t, bool gpu);
// For a sweep over several devices: throws the same error (for the first dtype) when no dtype of
// `dtypes` can run on any device of the run; `any_gpu`: the run includes a CUDA device.
void check_dtypes_for_run(const std::vector<DType>& dtypes, bool any_gpu);
// fp16 training needs the loss scaler (gradients underflow fp16's 2^-24); bf16 has fp32's range.
inline bool needs_loss_scaling(DType t) { return t == DType::fp16; }

// ---- dynamic loss scaling (torch.amp.GradScaler) ----

struct GradScalerConfig {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;   // consecutive finite steps before the scale grows
  bool enabled = true;          // disabled: scale 1, every step taken (bf16, fp32)
};

// Use per training step, as in PyTorch:
//   loss_to_backprop = scaler.scale(loss)       (multiply the loss, i.e. the seed gradient)
//   backward ...
//   scaler.unscale(grad, n) for every gradient  (grads *= 1/scale; notes any inf/NaN)
//   if (scaler.should_step()) optimizer.step(); (skipped when an inf/NaN was found)
//   scaler.update();                            (backoff or growth; ready for the next step)
// A GPU backend that checks and unscales on the device reports its flag with record_found_inf().
class GradScaler {
 public:
  explicit GradScaler(GradScalerConfig cfg = {});
  float scale() const { return cfg_.enabled ? scale_ : 1.0f; }
  float scale(float loss) const { return loss * scale(); }
  // grads *= 1/scale in place; returns true when these n values were all finite (checked before
  // the multiply, like PyTorch). Any non-finite value marks the step as overflowed.
  bool unscale(float* grads, std::size_t n);
  void record_found_inf(bool found) { found_inf_ = found_inf_ || found; }
  bool found_inf() const { return found_inf_; }
  // True when the optimizer should step (no inf/NaN seen since the last update()).
  bool should_step() const { return !cfg_.enabled || !found_inf_; }
  // Ends the step: on inf/NaN scale *= backoff and the finite-step counter resets; otherwise the
  // counter grows and after growth_interval finite steps scale *= growth (when that stays finite).
  void update();

  int growth_tracker() const { return tracker_; }  // consecutive finite steps so far
  long steps() const { return steps_; }
  long skipped_steps() const { return skipped_; }
  const GradScalerConfig& config() const { return cfg_; }

 private:
  GradScalerConfig cfg_;
  float scale_;
  int tracker_ = 0;
  long steps_ = 0, skipped_ = 0;
  bool found_inf_ = false;
};

// ---- an AMP training step for a CPU model (models/model.h) ----

class Model;
class Optimizer;
class Profiler;
class Executor;
struct Batch;

// zero-grad, forward, loss, backward, optimizer step under autocast to `dtype`, run by the CPU
// executor on a plan for that dtype (models/plan.h: the roundings are the plan's): a lower-precision
// layer (Conv2d, ConvTranspose2d, Linear) reads its input and weights rounded to the half type and
// its output and gradients (input and weight) are rounded too; the loss runs in fp32; elementwise
// layers keep their input's type; the fp32 master weights are restored before the optimizer (fp32)
// steps on the fp32 gradients. fp16 uses the GradScaler.
//
// bf16 where bf16_compute_native() (models/plan.h): the plan's bf16 steps really compute in bf16
// (oneDNN, our bf16 GEMM and fused kernels; vdpbf16ps, fp32 accumulation) and hand off in oneDNN's
// nChw16c layout between a conv and its ReLU + pool; elsewhere the arithmetic between roundings is
// fp32 (our fp32 kernels on values exactly representable in the half type): the numbers of a
// half-type GEMM with fp32 accumulation at fp32 speed ("emulated"). Activations are stored as fp32
// either way. fp16/tf32 are emulated the same way (used by tests; the CPU suites offer fp32 and bf16).
// fp32 is the model's own step.
class AmpTrainer {
 public:
  AmpTrainer(Model& m, Optimizer& opt, DType dtype, GradScalerConfig scaler = {});
  ~AmpTrainer();
  AmpTrainer(const AmpTrainer&) = delete;
  AmpTrainer& operator=(const AmpTrainer&) = delete;
  // One training step; returns the fp32 loss (unscaled).
  float step(const Batch& b);
  // The step without its optimizer update: zero-grad, forward, loss, backward under autocast, the
  // masters back and the gradients unscaled (fp16: the scaler notes an inf/NaN, found_inf()); what a
  // check holds against the fp32 step. step() = gradients() + the update (fp16: an inf/NaN found here
  // stands until that update). prof: a region per plan step and direction (--profile), or null.
  float gradients(const Batch& b, Profiler* prof = nullptr);
  std::size_t activation_bytes() const;  // the executor's values and gradients (Model::activation_bytes)
  // The parameters autocast casts for a step (read only by lower-precision layers; a tied weight that
  // an fp32 layer reads too is not among them).
  const std::vector<Param*>& cast_params() const { return cast_params_; }
  DType dtype() const { return dtype_; }
  GradScaler& scaler() { return scaler_; }
  bool last_step_skipped() const { return skipped_; }
  const Plan& plan(int n);  // the plan step() runs for a batch of n

 private:
  Model& m_;
  Optimizer& opt_;
  DType dtype_;
  GradScaler scaler_;
  bool skipped_ = false;
  std::unique_ptr<Executor> exec_;
  std::vector<Param*> cast_params_;  // the lower-precision layers' parameters (autocast casts them)
  std::vector<std::vector<float>> master_;
};

}  // namespace dlb::models
