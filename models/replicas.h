// A training step for small batches: one model replica per kernel thread, data-parallel on one machine.
//
// Splitting every layer over the kernel threads (what train_step does) shares all data between the
// cores: both threads read every weight, the parts' weight gradients are summed across threads, and a
// task's images need not stay on one thread from layer to layer. A store to a cache line another core
// has read invalidates that copy, several times the cost of a line no other core holds. At batch 4
// the lecture net's step writes ~20k such lines, which can eat the second core's whole gain (the
// measured costs: docs/notes/2026-11-26-models.md).
//
// Here thread k trains replica k (replica 0 is the model itself) on its share of the batch with every
// kernel single-threaded, so weights, activations and scratch never leave its core. Then each thread
// reads every replica's gradients, sums them weighted by the shares (the same order, the same bits on
// every thread), and applies the optimizer to its own replica with its own copy of the optimizer state:
// the replicas stay bit for bit equal without sending weights. The only cross-core traffic is one read
// of the others' gradients per step, and a replica's next zeroing of its gradients uses non-temporal
// stores (cpu::zero_streaming), which do not wait for the readers' copies to be invalidated.
//
// The result is the full batch's step up to the order of floating-point sums (a share's gradient, then
// the weighted sum), not train_step's bits. After step() the model's Param::grad holds replica 0's
// share of the gradient, not the batch's (the sum lives only inside the step); callers that need the
// batch gradient use zero_grad() + forward_backward().
#pragma once
#include <memory>
#include <vector>

#include "models/net.h"

namespace dlb::models {

class ReplicaStep {
 public:
  // Batches at most this big take the replica step (CpuTrainer); above it the layers split work well.
  static constexpr int kMaxBatch = 16;
  static constexpr int kMaxReplicas = 4;
  // How many replicas step() runs for a batch of n on this thread's kernel threads (1: none, the
  // caller should use train_step).
  static int replicas_for(int n);

  // One training step of `m` with `opt` on `b`, as train_step does, over replicas_for(b.n) replicas
  // (train_step itself when that is 1). The replicas are (re)made from `m` and `opt` whenever they may
  // differ: the first call, another model, optimizer or replica count, an optimizer step taken
  // elsewhere, or a parameter value changed in between (checked at a few elements per tensor).
  float step(Model& m, Optimizer& opt, const Batch& b);

  // For tests: the replicas besides the model (empty before the first replicated step).
  std::vector<const Model*> replicas() const;

 private:
  struct Replica {
    std::unique_ptr<Model> model;
    std::vector<Param*> params;
    std::vector<std::vector<float>> s1, s2;  // this replica's copy of the optimizer state
  };
  std::vector<Replica> reps_;  // replicas 1 .. R-1
  const Model* model_ = nullptr;
  const Optimizer* opt_ = nullptr;
  long synced_step_ = -1;  // opt.steps() after this object's last step

  bool in_sync(Model& m, Optimizer& opt, int replicas) const;
  void sync(Model& m, Optimizer& opt, int replicas);
};

}  // namespace dlb::models
