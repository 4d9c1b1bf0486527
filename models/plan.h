// A plan: how one training step of a model runs, made once per (model, batch, dtype, device) and
// CPU context (the ISA level and kernel threads in force, which decide what the kernels take) and
// run by the one CPU executor (models/executor.h) or the GPU trainer (models/cuda/gpu_trainer.cu).
// It is a list of steps: a layer, or consecutive layers fused into one pass; the CPU fast paths
// (the fused first conv + ReLU + pool, ReLU + pool, ReLU + dropout, the sparse-dy backward, bf16 compute and its
// nChw16c hand-offs) are step kinds. Which kind runs where is decided in one table (plan.cpp
// kRules). Under autocast (dtype != fp32) the plan also says which values are rounded, and when.
#pragma once
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/isa.h"
#include "models/layer.h"

namespace dlb::models {

class Model;

enum class Device { cpu, cuda };

enum class StepKind {
  layer,                // one layer: Layer::forward / backward in fp32 (on the GPU: its CUDA ops)
  relu_pool,            // ReLU -> MaxPool2d in one pass each way (max pooling commutes with ReLU)
  relu_dropout,         // ReLU -> Dropout in one pass each way (fp32; backward from y, no mask redrawn)
  conv_relu_pool,       // a first Conv2d -> ReLU -> MaxPool2d per image; dW over the pool's winners
  conv_sparse_dy,       // Conv2d: both gradients over dy's nonzeros (behind a pool), else dense
  // bf16 compute (Plan::bf16_native): oneDNN and our bf16 kernels (vdpbf16ps, fp32 sums)
  conv_bf16,            // Conv2d, oneDNN: y and dx come back rounded to bf16
  conv_sparse_dy_bf16,  // the same with the sparse-dy backward in bf16 where dy is sparse
  conv_transpose_bf16,  // ConvTranspose2d, oneDNN
  linear_bf16,          // Linear, our bf16 GEMM
  lm_head_bf16,         // TiedLMHead (GPT-2's LM head on the token embedding), our bf16 GEMM
  recurrent_bf16,       // RNN / LSTM (impl ours): its GEMMs on bf16 operands, gate math and state in fp32
  attention_bf16,       // MultiheadAttention with projections: those GEMMs on bf16 operands, the core fp32
  conv_relu_pool_bf16,  // a first Conv2d -> ReLU -> MaxPool2d per image in bf16; dW over the winners
  conv_bf16_relu_pool,  // Conv2d (oneDNN, y in bf16 nChw16c) -> ReLU + MaxPool2d reading that layout
};
const char* step_kind_name(StepKind k);
// Kinds whose output / input gradient comes back already rounded to bf16 (autocast rounds no more).
bool rounds_output(StepKind k);
bool rounds_dx(StepKind k);

// How a conv_bf16_relu_pool step computes its backward: dW over the pool's winners (a first layer),
// oneDNN reading dy in nChw16c as the pool writes it, or the pool's dense dy then conv_bf16's backward.
enum class PoolConvBackward { winners, nchw16c_dy, dense };

struct Step {
  StepKind kind = StepKind::layer;
  int node = 0, nodes = 1;  // the model's nodes [node, node + nodes) it runs
  std::vector<int> in;      // the values it reads (its first node's inputs)
  int out = 0;              // the value it writes (its last node's output)
  std::string name;         // in profiles: "conv1", "relu1+pool1"
  std::string fwd_algo, bwd_algo;  // in profiles: the CPU kernels it runs (cpu_steps.h step_algo), or ""
  double fwd_flops = 0, bwd_flops = 0;
  // Per input: its gradient is wanted (not a model input), and is added to (another step wrote it first).
  std::vector<char> dx, accumulate;
  std::vector<Param*> ready;  // parameters whose gradients are final once this step's backward ran
  PoolConvBackward pool_bwd = PoolConvBackward::dense;  // conv_bf16_relu_pool
  bool sparse_dy = false;  // conv_bf16_relu_pool's dense backward: the conv over dy's nonzeros
  int hand_on = -1;        // conv_relu_pool_bf16: the step that reads its output in bf16 nChw16c
  int hand_from = -1;      // conv_bf16_relu_pool: the step whose bf16 nChw16c output it reads as x
  // Autocast, each in place (fp32: none): input k to Plan::dtype before forward; the output after
  // it; dy before backward; each dx after it; the parameter gradients after it (to Plan::dtype).
  std::vector<char> round_in;
  DType round_out = DType::fp32, round_dy = DType::fp32, round_dx = DType::fp32;
  bool round_dw = false;
};

struct Plan {
  int n = 0;
  DType dtype = DType::fp32;  // autocast dtype (fp32: off)
  Device device = Device::cpu;
  bool bf16_native = false;  // bf16 on a CPU that computes it (bf16_compute_native())
  cpu::Isa isa = cpu::Isa::scalar;
  int threads = 1;
  int revision = 0;              // the model's graph it was made for (Model::revision)
  std::vector<Shape> shapes;     // per value
  std::vector<char> stored;      // per value: written by a step (or an input), not inside one
  std::vector<char> cast_input;  // per model input: rounded in place by a step (the executor copies it first)
  std::vector<Step> steps;
  // Still the plan for this call: the same graph, n, dtype and device, ISA level and kernel threads.
  bool current(const Model& m, int n, DType dtype, Device device) const;
};

Plan make_plan(const Model& m, int n, DType dtype, Device device = Device::cpu);

// Real bf16 compute for the CPU's bf16 autocast: oneDNN built, avx512_bf16, DLB_CPU_ISA allowing it.
// Elsewhere bf16 is emulated (fp32 kernels on bf16-rounded values).
bool bf16_compute_native();

}  // namespace dlb::models
