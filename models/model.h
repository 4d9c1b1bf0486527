// A model: a graph of layers over tensors ("values"), and its loss. Values are the model's inputs
// and its nodes' outputs, numbered in the order they are made; node k reads its input values and
// writes one. Built as a chain (add: a layer reading the last value) or as a graph (node: a layer
// reading given values: residual adds, two branches, a decoder reading the encoder's output). A
// value read by several nodes gets the sum of their gradients; a parameter read by several layers
// (a tied weight, Layer::borrowed) is listed, zeroed and stepped once.
//
// The training step runs a plan (models/plan.h) through the executor (models/executor.h); the fp64
// reference walks the same graph layer by layer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/layers.h"
#include "models/profiler.h"

namespace dlb::models {

class Executor;

enum class LossKind { cross_entropy, mse };

// One batch. Cross-entropy reads `labels`, one per row of the output (an output [n, classes] has n
// rows, [n, seq, vocab] n * seq: a loss over every position); MSE compares with `target` (same size
// as the output), or with input 0 itself when target is null (an autoencoder's reconstruction).
// The model's inputs: x is input 0 (float); a model with integer or several inputs passes all of
// them in `inputs` (float* or std::int32_t* as Model::add_input declared them).
struct Batch {
  const float* x = nullptr;
  const std::int32_t* labels = nullptr;
  const float* target = nullptr;
  int n = 0;
  const void* const* inputs = nullptr;
  const void* input(int k) const { return inputs ? inputs[k] : k == 0 ? static_cast<const void*>(x) : nullptr; }
};

struct Node {
  std::unique_ptr<Layer> layer;
  std::vector<int> in;  // the values it reads
  int out = 0;          // the value it writes
};

class Model {
 public:
  // `input`: input 0's shape (its batch dimension is ignored); float, or integer (token ids: a
  // sequence model's input 0, passed in Batch::inputs).
  Model(std::string name, Shape input, LossKind loss, bool integer_input = false);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // A layer reading the last value made (the input at first), as nn.Sequential chains them.
  Model& add(std::unique_ptr<Layer> l);
  template <class L, class... A>
  Model& add(A&&... a) { return add(std::make_unique<L>(std::forward<A>(a)...)); }
  // A layer reading values `in` (Layer::inputs() of them); returns the value it writes.
  int node(std::unique_ptr<Layer> l, std::vector<int> in);
  template <class L, class... A>
  int node(std::vector<int> in, A&&... a) { return node(std::make_unique<L>(std::forward<A>(a)...), std::move(in)); }
  // Another model input, per-item shape `item` (batch dimension ignored), float or integer (token
  // ids); returns its value.
  int add_input(Shape item, bool integer = false);

  const std::string& name() const { return name_; }
  LossKind loss() const { return loss_; }
  int num_inputs() const { return int(inputs_.size()); }
  int input_value(int k) const { return inputs_.at(std::size_t(k)).value; }
  bool is_input(int value) const { return producer_.at(std::size_t(value)) < 0; }
  bool integer_value(int value) const;
  int producer(int value) const { return producer_.at(std::size_t(value)); }  // its node, -1 for an input
  int output_value() const { return int(producer_.size()) - 1; }              // the last value made
  int revision() const { return int(producer_.size()); }  // changes as the graph grows (plans made before are stale)
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Layer*> layers() const;
  Shape input_shape(int n) const { return inputs_.front().item.with_batch(n); }
  Shape output_shape(int n) const { return value_shapes(n).back(); }
  std::vector<Shape> value_shapes(int n) const;  // every value's shape for batch n (InputError if one does not fit)

  std::vector<Param*> params() const;  // each once, in node order
  std::size_t num_params() const;
  std::string summary() const;  // one line per parameter: name and shape
  void init(std::uint64_t seed);
  void copy_params_from(const Model& other);  // same architecture
  // Another model of the same architecture and parameters (values and gradients), with buffers of its own.
  std::unique_ptr<Model> clone() const;
  // The largest per-tensor relative L2 error (kernels/common/verify.h L2Error) of this model's
  // gradients against `ref`'s (same architecture), and which tensor it is.
  double gradient_l2_error(const Model& ref, std::string& worst_tensor) const;

  // Training FLOPs per batch: forward + backward-data + backward-filter (2x forward for a layer
  // reading only model inputs, which needs no input gradient). Napkin math for GFLOP/s.
  double train_flops(int n) const { return flops(n, true); }
  double forward_flops(int n) const { return flops(n, false); }  // inference
  // A node's name in profiles: its parameters' prefix ("conv1", "fc2"), else its op's short name
  // and ordinal ("relu1", "pool2").
  std::string layer_name(std::size_t node) const;
  // --profile: forward_backward() reports a region per step and direction and the loss (null: off).
  void set_profiler(Profiler* p) { prof_ = p; }
  // Training mode and step number for every layer (Layer::set_step: Dropout's mask, eval mode).
  // The trainers call it before each step; a fresh model trains at step 0.
  void set_step(bool training, std::uint64_t step);
  // Activation checkpointing (torch.utils.checkpoint per segment): a segment is the nodes [first,
  // end); with checkpointing on, the values its nodes make (all but the last node's) are not kept
  // from forward to backward: the executor gives every segment one shared set of buffers and, in
  // backward, runs the segment's forward again from its inputs before its backward. Values made in a
  // segment must be read only inside it (the plan throws UsageError otherwise). Off by default; the
  // model declares its segments (gpt2: one per block).
  void add_checkpoint_segment(int first_node, int end_node);
  const std::vector<std::pair<int, int>>& checkpoint_segments() const { return segments_; }
  void set_checkpointing(bool on) { checkpointing_ = on; }
  bool checkpointing() const { return checkpointing_; }
  // Bytes the fp32 step's executor holds for values and their gradients (the activation memory;
  // layers' own per-step state aside), 0 before the first step.
  std::size_t activation_bytes() const;

  // The fp32 step: zero_grad(); forward_backward() leaves gradients in Param::grad and returns the
  // loss. predict() runs forward only and returns the output (logits / reconstruction).
  // `ready`, when given, is called during backward as soon as parameter gradients are final (steps
  // in reverse order, with their parameters): the data-parallel step (bench/dist.cpp) starts its
  // bucket all-reduces from there, overlapping them with the rest of backward.
  using GradsReady = std::function<void(const std::vector<Param*>&)>;
  void zero_grad();
  float forward_backward(const Batch& b, const GradsReady& ready = {});
  const std::vector<float>& predict(const float* x, int n);
  const std::vector<float>& predict(const Batch& b);

  // fp64 reference: sync_ref() copies the fp32 values into Param::ref_value; forward_backward_ref()
  // zeroes Param::ref_grad and fills it. Input 0 is taken in fp64 so gradient checks can perturb it
  // (dx: its gradient); other inputs come from b.
  void sync_ref();
  double forward_backward_ref(const double* x, const Batch& b, std::vector<double>* dx = nullptr);
  double loss_ref(const double* x, const Batch& b);

 private:
  struct Input {
    Shape item;
    bool integer;
    int value;
  };
  std::string name_;
  LossKind loss_;
  std::vector<Input> inputs_;
  std::vector<Node> nodes_;
  std::vector<int> producer_;  // per value: its node, or -1 - k for input k
  Profiler* prof_ = nullptr;
  std::vector<std::pair<int, int>> segments_;
  bool checkpointing_ = false;
  double flops(int n, bool train) const;
  std::unique_ptr<Executor> exec_;  // the fp32 step's plan and buffers
  std::vector<std::vector<double>> ref_forward(const double* x, const Batch& b, const std::vector<Shape>& sh) const;
};

// Loss on host buffers, fp32 and fp64 (the gradient is written when d is non-null): `classes` is
// the output's last dimension, every out_size / classes row a sample (cross-entropy).
float loss_forward_backward(LossKind k, const float* out, const Batch& b, std::size_t out_size, int classes, float* d);
double loss_forward_backward_ref(LossKind k, const double* out, const Batch& b, const double* x_ref,
                                 std::size_t out_size, int classes, double* d);

}  // namespace dlb::models
