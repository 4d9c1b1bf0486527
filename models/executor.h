// The one CPU executor: a plan's steps forward, the loss, then the steps backward in reverse, over
// buffers it keeps for the plan (activations, gradients, each step's scratch). Optional: a profiler
// (a region per step and direction, "forward conv1", "backward relu1+pool1", and "loss"), a hook
// called as parameter gradients become final, and a loss scale. With the model's checkpointing on
// (Model::set_checkpointing), the values made inside a checkpoint segment share one set of buffers
// (slot k of every segment: the segment's k-th step's output and its gradient) and backward runs the
// segment's forward again before its backward. The model's own fp32 step (and so
// the replica step) and the CPU AMP step run here; the GPU trainer runs the same step kinds itself.
#pragma once
#include <cstdint>
#include <vector>

#include "models/cpu_steps.h"
#include "models/model.h"
#include "models/plan.h"

namespace dlb::models {

class Executor {
 public:
  struct Hooks {
    Profiler* prof = nullptr;
    const Model::GradsReady* ready = nullptr;
    float loss_scale = 1.0f;  // the loss gradient is multiplied by it (the GradScaler's scale)
  };
  explicit Executor(DType dtype) : dtype_(dtype) {}
  DType dtype() const { return dtype_; }
  // The plan for a batch of n in the current CPU context, made again when that changed (plan.h).
  const Plan& plan(const Model& m, int n);
  // Forward only; returns the model's output.
  const std::vector<float>& forward(Model& m, const Batch& b, Profiler* p);
  // Forward, loss, backward: parameter gradients added into Param::grad; returns the loss.
  float forward_backward(Model& m, const Batch& b, const Hooks& h);
  // Bytes held for values and their gradients (plan's buffers, shared checkpoint slots included).
  std::size_t activation_bytes() const;

 private:
  DType dtype_;
  bool planned_ = false, checkpointing_ = false;
  Plan plan_;
  std::vector<std::vector<float>> act_, grad_;  // per value (steps' outputs) the executor keeps
  std::vector<std::vector<float>> slot_act_, slot_grad_;  // checkpointing: per slot, shared by the segments
  std::vector<float*> y_, dy_;                  // per value: its buffer and its gradient's (own or a slot)
  std::vector<int> recompute_;                  // per step: the first step of the segment it ends, else -1
  std::vector<std::vector<float>> copy_;        // per model input rounded in place: its copy
  std::vector<const void*> data_;               // per value: where it is now
  std::vector<StepScratch> scratch_;            // per step
  std::vector<float> part_[Layer::kMaxInputs];  // a gradient to add to one written already
  float* mutable_data(int v) { return const_cast<float*>(static_cast<const float*>(data_[std::size_t(v)])); }
  void run_forward(Model& m, const Batch& b, Profiler* p);
  void forward_step(const Model& m, std::size_t i, Profiler* p, const char* what);
  std::vector<int> checkpoint_slots(const Model& m);  // per value: its slot, else -1; fills recompute_
};

}  // namespace dlb::models
