// A model = a sequence of layers + a loss, trained by an optimizer. This file holds the CPU
// training step (fast fp32 path and fp64 reference path), the losses, SGD/Adam and the four seed
// models (models/zoo.cpp). The GPU twin of a model is models/cuda/gpu_model.h.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/layers.h"
#include "models/profiler.h"

namespace dlb::models {

enum class LossKind { cross_entropy, mse };

// One batch. Cross-entropy reads `labels` (n of them); MSE compares with `target` (same size as the
// model output), or with the input itself when target is null (an autoencoder's reconstruction).
struct Batch {
  const float* x = nullptr;
  const std::int32_t* labels = nullptr;
  const float* target = nullptr;
  int n = 0;
};

class Sequential {
 public:
  Sequential(std::string name, Shape input_chw, LossKind loss) : name_(std::move(name)), in_(input_chw), loss_(loss) {
    in_.n = 1;
  }
  Sequential& add(std::unique_ptr<Layer> l);
  template <class L, class... A>
  Sequential& add(A&&... a) { return add(std::make_unique<L>(std::forward<A>(a)...)); }

  const std::string& name() const { return name_; }
  Shape input_shape(int n) const { Shape s = in_; s.n = n; return s; }
  Shape output_shape(int n) const;
  LossKind loss() const { return loss_; }
  std::vector<Layer*> layers() const;
  std::vector<Param*> params() const;
  std::size_t num_params() const;
  std::string summary() const;  // one line per parameter: name and shape
  void init(std::uint64_t seed);
  void copy_params_from(const Sequential& other);  // same architecture
  // Another model of the same architecture and parameters (values and gradients), with buffers of its own.
  std::unique_ptr<Sequential> clone() const;
  // The largest per-tensor relative L2 error (kernels/common/verify.h L2Error) of this model's
  // gradients against `ref`'s (same architecture), and which tensor it is.
  double gradient_l2_error(const Sequential& ref, std::string& worst_tensor) const;

  // Training FLOPs per batch: forward + backward-data + backward-filter (2x forward for layers
  // after the first, which needs no input gradient). Napkin math for GFLOP/s.
  double train_flops(int n) const;

  // The layer's name in profiles: its parameters' prefix ("conv1", "fc2"), else kind + ordinal ("relu1").
  std::string layer_name(std::size_t i) const;
  // --profile: forward_backward() reports a region per layer and direction and the loss (null: off).
  void set_profiler(Profiler* p) { prof_ = p; }

  // Fast fp32 path: zero_grad(); forward_backward() leaves gradients in Param::grad and returns the
  // loss. predict() runs forward only and returns the output (logits / reconstruction).
  // `ready`, when given, is called during backward as soon as a layer's parameter gradients are
  // final (layers in reverse order, with that layer's parameters): the data-parallel step
  // (bench/dist.cpp) starts its bucket all-reduces from there, overlapping them with the rest of backward.
  using GradsReady = std::function<void(const std::vector<Param*>&)>;
  void zero_grad();
  float forward_backward(const Batch& b, const GradsReady& ready = {});
  const std::vector<float>& predict(const float* x, int n);

  // fp64 reference: sync_ref() copies the fp32 values into Param::ref_value; forward_backward_ref()
  // zeroes Param::ref_grad and fills it. Inputs are taken in fp64 so gradient checks can perturb them.
  void sync_ref();
  double forward_backward_ref(const double* x, const Batch& b, std::vector<double>* dx = nullptr);
  double loss_ref(const double* x, const Batch& b);

 private:
  std::string name_;
  Shape in_;
  LossKind loss_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;                 // shapes_[i] = input of layer i, for the current n
  std::vector<std::vector<float>> acts_, grads_;  // acts_[i] = output of layer i
  std::vector<float> dout_;
  // fused_[i]: layer i is a ReLU followed by a MaxPool2d, run as one MaxPool2d::forward_relu /
  // backward_relu pass (acts_[i] and grads_[i + 1] then stay empty: nothing reads them).
  std::vector<char> fused_;
  // conv_pool_: layers 0..2 are a Conv2d, a ReLU and a MaxPool2d, which may run as one pass per image
  // (Conv2d::forward_relu_pool, when its kernels take the shape); conv_pool_on_: this step's forward
  // ran them so (acts_[0] then holds nothing current and backward takes the fused path too).
  bool conv_pool_ = false, conv_pool_on_ = false;
  Profiler* prof_ = nullptr;
  void plan(int n);
  // The first layers fused where conv_pool_ and the kernels allow: the index of the next layer to run
  // (3, its input acts_[2]) or 0.
  std::size_t forward_conv_pool(const float* x);
  void backward_conv_pool(const float* x, const float* dy);
  float forward_backward_profiled(const Batch& b);
};

// Loss on host buffers, fp32 and fp64 (the gradient is written when d is non-null).
float loss_forward_backward(LossKind k, const float* out, const Batch& b, std::size_t out_size, int classes, float* d);
double loss_forward_backward_ref(LossKind k, const double* out, const Batch& b, const double* x_ref,
                                 std::size_t out_size, int classes, double* d);

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" | "adam"
  float lr = 0.001f, momentum = 0.9f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

class Optimizer {
 public:
  Optimizer(OptimizerConfig cfg, std::vector<Param*> params);
  void step();  // p -= update(grad), PyTorch semantics
  // This optimizer's state (step count, momentum / Adam moments) := `o`'s; same config and parameter
  // shapes (a second copy of the same model). Throws UsageError otherwise.
  void copy_state_from(const Optimizer& o);
  const OptimizerConfig& config() const { return cfg_; }
  long steps() const { return t_; }

  // step() in parts, for a step that keeps copies of the parameters and of this state (models/replicas.h):
  // begin_step() counts the step, then update() applies it to n elements of a parameter given as
  // separate buffers (values, gradient, and the state's: state(param, 0 | 1) for this optimizer's
  // own, null where the kind keeps none). Same arithmetic as step() element by element.
  void begin_step() { ++t_; }
  void update(float* value, const float* grad, float* s1, float* s2, std::size_t n) const;
  float* state(std::size_t param, int which) {
    auto& v = (which == 0 ? s1_ : s2_).at(param);
    return v.empty() ? nullptr : v.data();
  }

 private:
  OptimizerConfig cfg_;
  std::vector<Param*> params_;
  std::vector<std::vector<float>> s1_, s2_;  // momentum buffer / Adam m, v
  long t_ = 0;
  std::vector<std::array<std::size_t, 3>> slices_;  // step(): (parameter, first, last) per task
};

// A full training step on the CPU: zero-grad, forward, loss, backward, optimizer step.
float train_step(Sequential& m, Optimizer& opt, const Batch& b);

// ---- the seed models (models/zoo.cpp) ----
// Each takes the input shape (c, h, w); the defaults are the seeds' shapes.
std::unique_ptr<Sequential> make_net(int hidden = 128, int c = 3, int h = 32, int w = 32);  // lecture: 120,078 params
std::unique_ptr<Sequential> make_mlp(int c = 1, int h = 28, int w = 28);                    // 784-128-10
std::unique_ptr<Sequential> make_convnet(int c = 3, int h = 28, int w = 28);               // conv 3->32->64, fc 64*7*7->128->10
std::unique_ptr<Sequential> make_autoencoder(int c = 1, int h = 28, int w = 28, int first = 16);
// By name: net128 | mlp | convnet | autoencoder; input shape (0 = the seed's). UsageError otherwise.
std::unique_ptr<Sequential> make_model(const std::string& name, int c = 0, int h = 0, int w = 0);
OptimizerConfig default_optimizer(const std::string& model);  // net128: SGD(0.001, 0.9); others: Adam(1e-3)
const std::vector<std::string>& model_names();

}  // namespace dlb::models
