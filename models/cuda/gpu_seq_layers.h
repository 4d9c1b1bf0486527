// The sequence models' layers on one GPU, for the CUDA sequence trainer (gpu_seq_trainer.cu): a
// device twin per host node (models/layer.h's Op: embedding, rnn_tanh, lstm, select_step, linear,
// relu, add, layer_norm, dropout, positional_encoding, multihead_attention with or without its
// projections; GPT-2's gelu, position_embedding, lm_head in gpu_seq_layers_gpt2.cu) over cuBLAS and
// the kernels of kernels/cuda/seq/ and kernels/cuda/nn_ops.h. fp32 storage; every GEMM of the twins
// (Linear, attention's projections, the recurrent layers ours, the LM head) in DeviceParams::gemm's
// autocast (kernels/cuda/cublas_gemm.h gemm_f32: fp32, or tf32 / bf16 / fp16 operands, fp32 accumulation);
// LayerNorm, softmax, the attention core, the cells' math and the loss stay fp32. A twin is made for one batch size
// and holds the scratch its forward keeps for backward; it reads its configuration (and the dropout's
// step) from the host layer, its parameters from the trainer's flat device buffers.
// Gradient contract (the trainer's): backward OVERWRITES each input gradient dx (null: not wanted)
// and each parameter gradient, except Embedding and the tied LM head, which ADD into the table's (the
// Transformer embeds src and tgt with one; GPT-2's head reads wte), and PositionEmbedding, which adds
// into wpe's; the trainer zeroes the gradients once per step.
// Ran on an H100 (2026-11-27): the sequence and GPT-2 GPU tests pass.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/common/verify.h"
#include "models/layer.h"

namespace dlb::models::gpu_seq {

// Where each host parameter lives on the device: its value and its gradient (fp32); and the dtype
// the twins' GEMMs autocast to (fp32, tf32, bf16, fp16: the trainer's TrainOptions::dtype).
struct DeviceParams {
  std::map<const Param*, std::size_t> offset;
  float* values = nullptr;
  float* grads = nullptr;
  DType gemm = DType::fp32;
  // Non-null (the trainer's, with cuda_graph): the dropout ops add this device value to their
  // offsets, the host layers keyed at step 0, so a replayed step draws the step's masks.
  const std::uint64_t* dropout_offset = nullptr;
  float* value(const Param* p) const { return values + offset.at(p); }
  float* grad(const Param* p) const { return grads + offset.at(p); }
};

// One call of a node: its input shapes and device inputs (float or int32, as the host layer
// declares), its output; backward adds dy and the input gradients to write.
struct NodeIo {
  Shapes in;
  const void* const* xs;
  float* y;
  const float* dy = nullptr;
  float* const* dxs = nullptr;
  const float* x(int k = 0) const { return static_cast<const float*>(xs[k]); }
  const std::int32_t* ids(int k = 0) const { return static_cast<const std::int32_t*>(xs[k]); }
};

class NodeOps {
 public:
  virtual ~NodeOps() = default;
  virtual void forward(const NodeIo& io) = 0;
  virtual void backward(const NodeIo& io) = 0;
};

// Unsupported for a layer without a twin: the image layers, a recurrent layer with impl onednn; and
// for a recurrent layer with impl cudnn under a GEMM autocast `gemm` other than fp32 (cuDNN's RNN
// is set up in fp32 with its default math: kernels/cuda/seq/cudnn_rnn.h).
void check_twin(const Layer& l, DType gemm = DType::fp32);
// The twin of `l` for inputs of shapes `in` (one batch size); check_twin's Unsupported first.
std::unique_ptr<NodeOps> make_node_ops(Layer& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s);

// Whether `op` belongs to the sequence models (the seed's or GPT-2's): a model with one trains in the
// GPU sequence trainer, the others in the image trainer.
bool is_seq_op(Op op);

// Shared by the twins' files. Row-major C[m, n] = op(A) op(B) + beta C on fp32 buffers, autocast to
// `t` (cuda::gemm_f32: fp32 no TF32, or the tf32 / bf16 / fp16 compute type), and a device-to-device copy.
void gemm(cudaStream_t s, DType t, bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc);
void copy(float* dst, const float* src, std::size_t n, cudaStream_t s);
// GPT-2's twins (gpu_seq_layers_gpt2.cu): position_embedding, lm_head.
std::unique_ptr<NodeOps> make_gpt2_ops(Layer& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s);

}  // namespace dlb::models::gpu_seq
