// A model (models/model.h: a graph of layers and a loss) trained by an optimizer: SGD/Adam, the
// CPU training step, and the four seed models (models/zoo.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace dlb::models {

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" | "adam" | "adamw" (GPT-2's: kernels/cpu/seq/adamw.h)
  float lr = 0.001f, momentum = 0.9f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.01f;  // adamw's (decoupled), PyTorch's default
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

// The gradients of one batch on the CPU: zero-grad, forward, loss, backward (the loss returned, the
// gradients in Param::grad); with a profiler, zero_grad and every layer as regions.
float gradients(Model& m, const Batch& b, Profiler* prof = nullptr);
// A full training step on the CPU: gradients(), then the optimizer step.
float train_step(Model& m, Optimizer& opt, const Batch& b);

// ---- the seed models (models/zoo.cpp) ----
// Each takes the input shape (c, h, w); the defaults are the seeds' shapes.
std::unique_ptr<Model> make_net(int hidden = 128, int c = 3, int h = 32, int w = 32);  // lecture: 120,078 params
std::unique_ptr<Model> make_mlp(int c = 1, int h = 28, int w = 28);                    // 784-128-10
std::unique_ptr<Model> make_convnet(int c = 3, int h = 28, int w = 28);               // conv 3->32->64, fc 64*7*7->128->10
std::unique_ptr<Model> make_autoencoder(int c = 1, int h = 28, int w = 28, int first = 16);
// By name: net128 | mlp | convnet | autoencoder; input shape (0 = the seed's). UsageError otherwise.
std::unique_ptr<Model> make_model(const std::string& name, int c = 0, int h = 0, int w = 0);
OptimizerConfig default_optimizer(const std::string& model);  // net128: SGD(0.001, 0.9); others: Adam(1e-3)
const std::vector<std::string>& model_names();

}  // namespace dlb::models
