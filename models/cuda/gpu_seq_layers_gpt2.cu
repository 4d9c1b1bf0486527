// GPT-2's device twins with parameters (see gpu_seq_layers.h; GELU is a pointwise twin there, the
// attention core is AttentionOps without projections): the learned positions (wpe) and the LM head
// tied to wte (its GEMMs in DeviceParams::gemm's autocast), the mirrors of models/layers/position_embedding.h and lm_head.h.
// Ran on an H100 (2026-11-27): test_train_gpt2_gpu passes.
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/embedding.h"
#include "models/cuda/gpu_seq_layers.h"
#include "models/layers.h"

namespace dlb::models::gpu_seq {

namespace {

namespace gs = cuda::seq;

// y[b, t, :] = x[b, t, :] + wpe[t, :]: the table's first T rows are one contiguous [T, C] block,
// added to every item. Backward: dx = dy, wpe.grad[t] += sum over b (the trainer zeroed it).
class PositionEmbeddingOps final : public NodeOps {
 public:
  PositionEmbeddingOps(PositionEmbedding& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : B_(in.n()), T_(in[1]), C_(l.C), w_(p.value(&l.weight)), dw_(p.grad(&l.weight)), s_(s) {}
  void forward(const NodeIo& io) override {
    const std::size_t tc = std::size_t(T_) * C_;
    gs::add_broadcast(io.x(), w_, io.y, std::size_t(B_) * tc, tc, s_);
  }
  void backward(const NodeIo& io) override {
    gs::position_embedding_backward(B_, T_, io.dy, C_, dw_, s_);
    if (io.dxs[0]) copy(io.dxs[0], io.dy, std::size_t(B_) * T_ * C_, s_);
  }

 private:
  int B_, T_, C_;
  const float* w_;
  float* dw_;
  cudaStream_t s_;
};

// logits[m, V] = x[m, C] wte[:V]^T over the V real rows of the padded [Vp, C] table (llm.c's padded
// rows never reach the loss). Backward: wte.grad[:V] += dy^T x (ADDS: the Embedding's gradient shares
// the table), dx = dy wte[:V]. Napkin math, gpt2-124m at B 4 T 64: 2 * 256 * 768 * 50257 = 19.8 GFLOP
// forward, twice that backward: the step's largest GEMMs.
class LMHeadOps final : public NodeOps {
 public:
  LMHeadOps(TiedLMHead& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : V_(l.vocab), C_(l.C), m_(int(in.size() / std::size_t(l.C))), s_(s), t_(p.gemm) {
    const Param* w = l.params().at(0);
    w_ = p.value(w), dw_ = p.grad(w);
  }
  void forward(const NodeIo& io) override { gemm(s_, t_, false, true, m_, V_, C_, io.x(), C_, w_, C_, 0.f, io.y, V_); }
  void backward(const NodeIo& io) override {
    gemm(s_, t_, true, false, V_, C_, m_, io.dy, V_, io.x(), C_, 1.f, dw_, C_);
    if (io.dxs[0]) gemm(s_, t_, false, false, m_, C_, V_, io.dy, V_, w_, C_, 0.f, io.dxs[0], C_);
  }

 private:
  int V_, C_, m_;
  cudaStream_t s_;
  DType t_;
  const float* w_ = nullptr;
  float* dw_ = nullptr;
};

}  // namespace

std::unique_ptr<NodeOps> make_gpt2_ops(Layer& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s) {
  switch (l.op()) {
    case Op::position_embedding:
      return std::make_unique<PositionEmbeddingOps>(static_cast<PositionEmbedding&>(l), in[0], p, s);
    case Op::lm_head: return std::make_unique<LMHeadOps>(static_cast<TiedLMHead&>(l), in[0], p, s);
    default: throw Unsupported(std::string("layer ") + op_name(l.op()) + " is not one of GPT-2's twins");
  }
}

}  // namespace dlb::models::gpu_seq
