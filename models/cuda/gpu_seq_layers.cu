// The sequence layers' device twins (see gpu_seq_layers.h): a class per op, each the GPU mirror of
// its host layer's forward / backward in models/layers/, fp32 storage, the GEMMs in DeviceParams::gemm.
#include "models/cuda/gpu_seq_layers.h"

#include <cublas_v2.h>

#include <string>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/layernorm.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/nn_ops.h"
#include "kernels/cuda/seq/attention.h"
#include "kernels/cuda/seq/cudnn_rnn.h"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/embedding.h"
#include "kernels/cuda/seq/rnn.h"
#include "kernels/cuda/seq/rows.h"
#include "models/layers.h"

namespace dlb::models::gpu_seq {

void copy(float* dst, const float* src, std::size_t n, cudaStream_t s) {
  DLB_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

void gemm(cudaStream_t s, DType t, bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
          float beta, float* c, int ldc) {
  cuda::gemm_f32(s, t, ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
}

namespace {

using cuda::DeviceBuffer;
namespace cs = cpu::seq;
namespace gs = cuda::seq;

// A projection by rows [r0, r0 + cols) of a weight W [*, k] and its bias: y[m, cols] = x W_r^T + b_r
// (Linear: all rows; attention's packed in_proj: the q rows, or the k and v rows).
struct Proj {
  const float* w;
  const float* b;
  float* dw;
  float* db;
  int k, r0, cols;
  DType t;  // the GEMMs' autocast
  void forward(const float* x, int m, float* y, cudaStream_t s) const {
    gemm(s, t, false, true, m, cols, k, x, k, w + std::size_t(r0) * k, k, 0.f, y, cols);
    cuda::bias_rows_forward(y, b + r0, m, cols, DType::fp32, s);
  }
  // dW_r = dy^T x, db_r = colsum(dy) (both overwritten), dx = dy W_r (dx may be null).
  void backward(const float* x, const float* dy, int m, float* dx, cudaStream_t s) const {
    gemm(s, t, true, false, cols, k, m, dy, cols, x, k, 0.f, dw + std::size_t(r0) * k, k);
    cuda::bias_rows_backward(dy, db + r0, m, cols, DType::fp32, s);
    if (dx) gemm(s, t, false, false, m, k, cols, dy, cols, w + std::size_t(r0) * k, k, 0.f, dx, k);
  }
};
Proj proj_of(const DeviceParams& p, const Param& w, const Param& b, int k, int r0, int cols) {
  return {p.value(&w), p.value(&b), p.grad(&w), p.grad(&b), k, r0, cols, p.gemm};
}

class EmbeddingOps final : public NodeOps {
 public:
  EmbeddingOps(Embedding& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : l_(l), B_(in.n()), T_(int(in.per_item())), w_(p.value(&l.weight())), dw_(p.grad(&l.weight())),
        scratch_(gs::embedding_backward_scratch_bytes(B_, T_)), s_(s) {}
  void forward(const NodeIo& io) override { gs::embedding_forward(io.ids(), B_, T_, w_, l_.dim, nullptr, io.y, s_); }
  // Adds into the weight's gradient (the tied table's two uses sum there).
  void backward(const NodeIo& io) override {
    gs::embedding_backward(io.ids(), B_, T_, io.dy, l_.dim, dw_, nullptr, scratch_.data(), s_);
  }

 private:
  Embedding& l_;
  int B_, T_;
  const float* w_;
  float* dw_;
  DeviceBuffer<char> scratch_;
  cudaStream_t s_;
};

// The ops without parameters or scratch of their own.
class PointwiseOps final : public NodeOps {
 public:
  PointwiseOps(Layer& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : l_(l), in_(in), n_(in.size()), s_(s), offset_add_(p.dropout_offset) {
    if (l.op() == Op::positional_encoding) {  // the table's first T rows, uploaded once
      auto& pe = static_cast<PositionalEncoding&>(l);
      pe_ = DeviceBuffer<float>(std::size_t(in[1]) * pe.C);
      pe_.upload(pe.pe32.data(), pe_.size(), s);
    }
  }
  void forward(const NodeIo& io) override {
    switch (l_.op()) {
      case Op::relu: return cuda::relu_forward(io.x(), io.y, n_, DType::fp32, s_);
      case Op::gelu: return gs::gelu_forward(io.x(), io.y, n_, DType::fp32, s_);  // the CPU's tanh formula
      case Op::positional_encoding: return gs::add_broadcast(io.x(), pe_.data(), io.y, n_, pe_.size(), s_);
      case Op::add: {  // y = x0 + x1 as one column of n elements
        const float one = 1.f;
        DLB_CUBLAS_CHECK(cublasSgeam(cuda::cublas_handle_on(s_), CUBLAS_OP_N, CUBLAS_OP_N, int(n_), 1, &one, io.x(0),
                                     int(n_), &one, io.x(1), int(n_), io.y, int(n_)));
        return;
      }
      case Op::dropout: {
        const auto& d = static_cast<Dropout&>(l_);
        if (!d.active()) return copy(io.y, io.x(), n_, s_);
        const DropoutKey k = dropout_key(d.stream, d.step);
        return gs::dropout_forward(io.x(), io.y, nullptr, n_, d.p, k.seed, k.offset, DType::fp32, s_, offset_add_);
      }
      case Op::select_step: return select(io.x(), io.y, false);
      default: throw Unsupported(std::string("layer ") + op_name(l_.op()) + " has no CUDA sequence implementation");
    }
  }
  void backward(const NodeIo& io) override {
    float* dx = io.dxs[0];
    switch (l_.op()) {
      case Op::relu:
        if (dx) cuda::relu_backward(io.y, io.dy, dx, n_, DType::fp32, s_);
        return;
      case Op::gelu:  // reads x (the tanh recomputed, as the CPU layer)
        if (dx) gs::gelu_backward(io.x(), io.dy, dx, n_, DType::fp32, s_);
        return;
      case Op::positional_encoding:
        if (dx) copy(dx, io.dy, n_, s_);
        return;
      case Op::add:
        for (int k = 0; k < 2; ++k)
          if (io.dxs[k]) copy(io.dxs[k], io.dy, n_, s_);
        return;
      case Op::dropout: {
        if (!dx) return;
        const auto& d = static_cast<Dropout&>(l_);
        if (!d.active()) return copy(dx, io.dy, n_, s_);
        const DropoutKey k = dropout_key(d.stream, d.step);
        return gs::dropout_backward(io.dy, dx, n_, d.p, k.seed, k.offset, DType::fp32, s_, offset_add_);
      }
      case Op::select_step:
        if (!dx) return;
        DLB_CUDA_CHECK(cudaMemsetAsync(dx, 0, n_ * sizeof(float), s_));
        return select(io.dy, dx, true);
      default: return;
    }
  }

 private:
  // SelectStep: step t's row of each item ([n, T, F], or time-major [T, n, F]) <-> [n, F], as one
  // strided copy (back: into the zeroed dx).
  void select(const float* src, float* dst, bool back) {
    const auto& st = static_cast<SelectStep&>(l_);
    const int T = in_[1], F = in_.last(), n = in_.n(), t = st.t < 0 ? T + st.t : st.t;
    const std::size_t first = st.seq_first ? std::size_t(t) * n * F : std::size_t(t) * F;
    const std::size_t pitch = (st.seq_first ? std::size_t(F) : std::size_t(T) * F) * sizeof(float);
    const std::size_t row = std::size_t(F) * sizeof(float);
    if (!back)
      DLB_CUDA_CHECK(cudaMemcpy2DAsync(dst, row, src + first, pitch, row, n, cudaMemcpyDeviceToDevice, s_));
    else
      DLB_CUDA_CHECK(cudaMemcpy2DAsync(dst + first, pitch, src, row, row, n, cudaMemcpyDeviceToDevice, s_));
  }
  Layer& l_;
  Shape in_;
  std::size_t n_;
  cudaStream_t s_;
  const std::uint64_t* offset_add_;  // DeviceParams::dropout_offset
  DeviceBuffer<float> pe_;
};

class LinearOps final : public NodeOps {
 public:
  LinearOps(Linear& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : proj_(proj_of(p, l.weight, l.bias, l.in_f, 0, l.out_f)), rows_(l.rows(in)), s_(s) {}
  void forward(const NodeIo& io) override { proj_.forward(io.x(), rows_, io.y, s_); }
  void backward(const NodeIo& io) override { proj_.backward(io.x(), io.dy, rows_, io.dxs[0], s_); }

 private:
  Proj proj_;
  int rows_;
  cudaStream_t s_;
};

class LayerNormOps final : public NodeOps {
 public:
  LayerNormOps(LayerNorm& l, const Shape& in, const DeviceParams& p, cudaStream_t s)
      : C_(l.C), rows_(long(in.size() / std::size_t(l.C))), w_(p.value(&l.weight)), b_(p.value(&l.bias)),
        dw_(p.grad(&l.weight)), db_(p.grad(&l.bias)), mean_(std::size_t(rows_)), rstd_(std::size_t(rows_)),
        scratch_(gs::layernorm_backward_scratch_bytes(rows_, C_)), s_(s) {}
  void forward(const NodeIo& io) override {
    gs::layernorm_forward(io.x(), w_, b_, io.y, mean_.data(), rstd_.data(), rows_, C_, cs::kLayerNormEps, s_);
  }
  void backward(const NodeIo& io) override {
    float* dx = io.dxs[0];
    if (!dx) {  // the kernel writes dx always: room for it, made once, where the input is a model input
      if (dx_.size() != io.in[0].size()) dx_ = DeviceBuffer<float>(io.in[0].size());
      dx = dx_.data();
    }
    gs::layernorm_backward(io.dy, io.x(), w_, mean_.data(), rstd_.data(), dx, dw_, db_, rows_, C_, scratch_.data(), s_);
  }

 private:
  int C_;
  long rows_;
  const float *w_, *b_;
  float *dw_, *db_;
  DeviceBuffer<float> mean_, rstd_, dx_;
  DeviceBuffer<char> scratch_;
  cudaStream_t s_;
};

// nn.MultiheadAttention (models/layers/multihead_attention.h): with its projections, the in and out
// projections as cuBLAS GEMMs around the core; without (GPT-2's core), the core alone over the node's
// packed [n, T, 3E] QKV input, its [n, T, E] output and their gradients. The core: unfused (cuBLAS +
// softmax, P kept; dropout on P) or flash (fp32, ours) where the host layer picks flash (no dropout,
// causal) and the head fits (D <= 128). P and its scratch (B H Tq Tk floats each: 400 MB a layer at
// gpt2-124m B 4 T 1024) are only made where the unfused core can run.
class AttentionOps final : public NodeOps {
 public:
  AttentionOps(MultiheadAttention& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s)
      : l_(l), in_(in), s_(s), offset_add_(p.dropout_offset) {
    const cs::Attn a = l.attn(Shapes(in_.data(), int(in_.size())));
    const std::size_t rows = std::size_t(a.B) * a.H * a.Tq;
    cs::Attn no_drop = a;
    no_drop.dropout = 0.f;
    if (l.o.dropout > 0 || !flash(no_drop)) unfused_room(a);
    lse_ = DeviceBuffer<float>(rows), rows_ = DeviceBuffer<float>(rows);
    if (!l.o.projections) return;
    const int E = l.E;
    mq_ = a.B * a.Tq, mk_ = a.B * a.Tk;
    const bool x = l.o.cross;
    q_ = proj_of(p, l.in_w, l.in_b, E, 0, x ? E : 3 * E);
    kv_ = proj_of(p, l.in_w, l.in_b, E, E, 2 * E);
    out_ = proj_of(p, l.out_w, l.out_b, E, 0, E);
    qkv_ = DeviceBuffer<float>(std::size_t(mq_) * (x ? E : 3 * E));
    dqkv_ = DeviceBuffer<float>(qkv_.size());
    if (x) kvb_ = DeviceBuffer<float>(std::size_t(mk_) * 2 * E), dkvb_ = DeviceBuffer<float>(kvb_.size());
    ctx_ = DeviceBuffer<float>(std::size_t(mq_) * E), dctx_ = DeviceBuffer<float>(ctx_.size());
  }

  void forward(const NodeIo& io) override {
    const cs::Attn a = l_.attn(io.in);
    if (!l_.o.projections) return core_forward(a, views(io.x(0), io.y, nullptr));
    q_.forward(io.x(0), mq_, qkv_.data(), s_);  // self: q, k, v; cross: q (k, v from the memory)
    if (l_.o.cross) kv_.forward(io.x(1), mk_, kvb_.data(), s_);
    core_forward(a, views(qkv_.data(), ctx_.data(), dqkv_.data()));
    out_.forward(ctx_.data(), mq_, io.y, s_);
  }

  void backward(const NodeIo& io) override {
    const cs::Attn a = l_.attn(io.in);
    if (!l_.o.projections) {
      float* dx = io.dxs[0];
      if (!dx) {  // the kernels write dQ, dK, dV always (a core reading a model input: made once)
        if (dqkv_.size() != io.in[0].size()) dqkv_ = DeviceBuffer<float>(io.in[0].size());
        dx = dqkv_.data();
      }
      return core_backward(a, views(io.x(0), io.y, dx), io.dy);
    }
    out_.backward(ctx_.data(), io.dy, mq_, dctx_.data(), s_);
    core_backward(a, views(qkv_.data(), ctx_.data(), dqkv_.data()), dctx_.data());
    q_.backward(io.x(0), dqkv_.data(), mq_, io.dxs[0], s_);
    if (l_.o.cross) kv_.backward(io.x(1), dkvb_.data(), mk_, io.dxs[1], s_);
  }

 private:
  // Q, K, V, the context and their gradients as head views: of the packed [rows, 3E] (self) or
  // [rows, E] (cross: K, V in kvb_) `qkv`, the [rows, E] context `ctx` and `dqkv` (null in forward).
  struct V {
    gs::CView q, k, v;
    gs::MView o, dq, dk, dv;
  };
  V views(const float* qkv, float* ctx, float* dqkv) const {
    const int E = l_.E, H = l_.heads, D = E / H, Tq = in_[0][1], Tk = l_.o.cross ? in_[1][1] : Tq;
    const long ldq = l_.o.cross ? E : 3L * E, ldkv = l_.o.cross ? 2L * E : 3L * E;
    const float* k = l_.o.cross ? kvb_.data() : qkv + E;
    float* dk = l_.o.cross ? dkvb_.data() : dqkv ? dqkv + E : nullptr;
    return {cs::bthd(qkv, H, Tq, D, ldq),     cs::bthd(k, H, Tk, D, ldkv),    cs::bthd(k + E, H, Tk, D, ldkv),
            cs::bthd(ctx, H, Tq, D),          cs::bthd(dqkv, H, Tq, D, ldq),  cs::bthd(dk, H, Tk, D, ldkv),
            cs::bthd(dk ? dk + E : nullptr, H, Tk, D, ldkv)};
  }
  // P (twice with dropout: the CPU draws it per step, so the room for it is always there) and dP;
  // flash keeps the rows' log-sum-exp and a row scratch instead.
  void unfused_room(const cs::Attn& a) {
    const std::size_t P = std::size_t(a.B) * a.H * a.Tq * a.Tk;
    probs_ = DeviceBuffer<float>(l_.o.dropout > 0 ? 2 * P : P), scratch_ = DeviceBuffer<float>(P);
  }
  void core_forward(const cs::Attn& a, const V& v) {
    if (flash(a))
      return gs::attention_forward_flash(a, any(v.q), any(v.k), any(v.v), anym(v.o), lse_.data(), DType::fp32, s_);
    if (!probs_.size()) unfused_room(a);  // the host layer's algo changed to unfused after the plan was made
    gs::attention_forward_unfused(a, v.q, v.k, v.v, v.o, probs_.data(), s_, offset_add_);
  }
  // dctx: the gradient of the context [rows, E].
  void core_backward(const cs::Attn& a, const V& v, const float* dctx) {
    const gs::CView dout{dctx, v.o.sb, v.o.sh, v.o.st};
    if (flash(a))
      gs::attention_backward_flash(a, any(v.q), any(v.k), any(v.v), any(cview(v.o)), any(dout), lse_.data(), anym(v.dq),
                                   anym(v.dk), anym(v.dv), rows_.data(), DType::fp32, s_);
    else
      gs::attention_backward_unfused(a, v.q, v.k, v.v, dout, probs_.data(), v.dq, v.dk, v.dv, scratch_.data(), s_,
                                     offset_add_);
  }
  bool flash(const cs::Attn& a) const {
    return a.dropout == 0.f && std::string(l_.algorithm(a).name) == "flash" && a.D <= 128;
  }
  static gs::CView cview(const gs::MView& m) { return {m.p, m.sb, m.sh, m.st}; }
  static gs::AnyView any(const gs::CView& c) { return {c.p, c.sb, c.sh, c.st}; }
  static gs::AnyMView anym(const gs::MView& m) { return {m.p, m.sb, m.sh, m.st}; }

  MultiheadAttention& l_;
  std::vector<Shape> in_;
  cudaStream_t s_;
  const std::uint64_t* offset_add_;  // DeviceParams::dropout_offset
  int mq_ = 0, mk_ = 0;
  Proj q_{}, kv_{}, out_{};
  DeviceBuffer<float> qkv_, dqkv_, kvb_, dkvb_, ctx_, dctx_, probs_, scratch_, lse_, rows_;
};

// nn.RNN / nn.LSTM (models/layers/rnn.h), a call per stacked layer: ours (kernels/cuda/seq/rnn.h,
// cuBLAS + our fused cells) or cuDNN's RNN API (one CudnnRnn per layer, its weight space refilled
// from our flat parameters before every forward: the optimizer changed them).
class RecurrentOps final : public NodeOps {
 public:
  RecurrentOps(Recurrent& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s)
      : l_(l), n_(in[0].n()), T_(in[0][1]), s_(s), gemm_(p.gemm) {
    const std::size_t N = std::size_t(n_) * T_, BH = std::size_t(n_) * l.hidden;
    std::size_t scratch = 0;
    for (int k = 0; k < l.layers; ++k) {
      const cs::RnnShape sh = shape(k);
      const Param* q = &l.p[std::size_t(4 * k)];
      w_.push_back({p.value(q), p.value(q + 1), p.value(q + 2), p.value(q + 3)});
      g_.push_back({p.grad(q), p.grad(q + 1), p.grad(q + 2), p.grad(q + 3)});
      if (l.impl == RnnImpl::cudnn) cudnn_.push_back(std::make_unique<gs::CudnnRnn>(sh));
      else saved_.emplace_back(gs::rnn_saved_floats(sh)), scratch = std::max(scratch, gs::rnn_scratch_floats(sh));
      if (k + 1 < l.layers) ys_.emplace_back(N * l.hidden);
      if (l.state) h0_.emplace_back(BH), c0_.emplace_back(l.cell == cs::RnnCell::lstm ? BH : 0);
    }
    // CudnnRnn fills its zeros and lengths on the legacy stream: done before our stream reads them.
    if (!cudnn_.empty()) DLB_CUDA_CHECK(cudaDeviceSynchronize());
    scratch_ = DeviceBuffer<float>(std::max<std::size_t>(scratch, 1));
    if (l.layers > 1) dbuf_[0] = DeviceBuffer<float>(N * l.hidden), dbuf_[1] = DeviceBuffer<float>(N * l.hidden);
  }

  void forward(const NodeIo& io) override {
    const bool lstm = l_.cell == cs::RnnCell::lstm;
    const float* x = io.x(0);
    for (int k = 0; k < l_.layers; ++k) {
      const auto K = std::size_t(k);
      float* y = k + 1 < l_.layers ? ys_[K].data() : io.y;
      const float *h0 = nullptr, *c0 = nullptr;
      if (l_.state) {
        h0 = state_rows(io.x(1), k, h0_[K].data());
        if (lstm) c0 = state_rows(io.x(2), k, c0_[K].data());
      }
      if (l_.impl == RnnImpl::cudnn) {
        // Eval mode (infer_batch): the weights change only with the optimizer's step count, so a
        // weight space filled at this count stays right (a refill is 16 small copies a layer for
        // lstm: tens of us of launches, more than the batch-1 forward itself may take).
        if (l_.training || filled_step_ != l_.step) cudnn_[K]->set_weights(w_[K], s_);
        cudnn_[K]->forward(x, h0, c0, y, nullptr, nullptr, l_.training, s_);  // eval: inference mode
      } else {
        gs::rnn_forward(shape(k), w_[K], x, h0, c0, y, nullptr, nullptr, saved_[K].data(), scratch_.data(), s_, gemm_);
      }
      x = y;
    }
    filled_step_ = l_.training ? ~std::uint64_t(0) : l_.step;  // a training forward: a step follows
  }

  void backward(const NodeIo& io) override {
    const float* dy = io.dy;
    for (int k = l_.layers - 1; k >= 0; --k) {
      const auto K = std::size_t(k);
      const float* x = k ? ys_[K - 1].data() : io.x(0);
      // layer k > 0 hands its dx to layer k - 1 as dy, through two buffers in turn
      float* dx = k ? dbuf_[std::size_t(l_.layers - 1 - k) % 2].data() : io.dxs[0];
      if (l_.impl == RnnImpl::cudnn) {
        const float* y = k + 1 < l_.layers ? ys_[K].data() : io.y;
        const float* h0 = l_.state ? h0_[K].data() : nullptr;
        const float* c0 = l_.state && l_.cell == cs::RnnCell::lstm ? c0_[K].data() : nullptr;
        cudnn_[K]->backward(x, h0, c0, y, dy, nullptr, nullptr, dx, nullptr, nullptr, g_[K], s_);
      } else {
        gs::rnn_backward(shape(k), w_[K], x, dy, nullptr, nullptr, saved_[K].data(), dx, nullptr, nullptr, g_[K],
                         scratch_.data(), s_, gemm_);
      }
      dy = dx;
    }
  }

 private:
  cs::RnnShape shape(int k) const {
    cs::RnnShape s = l_.shape(k, n_, T_);
    s.bf16 = false;  // the CPU's switch; here gemm_ picks the GEMMs' compute type
    return s;
  }
  // Layer k's [n, H] rows of a [n, layers, H] initial state, gathered into `out` (one strided copy).
  const float* state_rows(const float* st, int k, float* out) const {
    const std::size_t H = std::size_t(l_.hidden) * sizeof(float);
    DLB_CUDA_CHECK(cudaMemcpy2DAsync(out, H, st + std::size_t(k) * l_.hidden, H * l_.layers, H, std::size_t(n_),
                                     cudaMemcpyDeviceToDevice, s_));
    return out;
  }
  Recurrent& l_;
  int n_, T_;
  cudaStream_t s_;
  DType gemm_;
  std::vector<cs::RnnWeights> w_;
  std::vector<cs::RnnGrads> g_;
  std::vector<std::unique_ptr<gs::CudnnRnn>> cudnn_;
  std::vector<DeviceBuffer<float>> saved_, ys_, h0_, c0_;
  DeviceBuffer<float> scratch_, dbuf_[2];
  std::uint64_t filled_step_ = ~std::uint64_t(0);  // the weights' step count the cuDNN spaces hold (eval)
};

}  // namespace

bool is_seq_op(Op op) {
  switch (op) {
    case Op::embedding: case Op::rnn_tanh: case Op::lstm: case Op::select_step: case Op::layer_norm:
    case Op::dropout: case Op::positional_encoding: case Op::multihead_attention: case Op::gelu:
    case Op::position_embedding: case Op::lm_head:
      return true;
    default: return false;
  }
}

void check_twin(const Layer& l, DType gemm) {
  switch (l.op()) {
    case Op::embedding: case Op::linear: case Op::layer_norm: case Op::relu: case Op::add: case Op::dropout:
    case Op::select_step: case Op::positional_encoding:
      return;
    case Op::rnn_tanh: case Op::lstm:
      if (static_cast<const Recurrent&>(l).impl == RnnImpl::onednn)
        throw Unsupported(static_cast<const Recurrent&>(l).p[0].name + ": impl onednn runs on the CPU only");
      if (static_cast<const Recurrent&>(l).impl == RnnImpl::cudnn && gemm != DType::fp32)
        throw Unsupported(static_cast<const Recurrent&>(l).p[0].name + ": impl cudnn runs in fp32 only, not " +
                          dtype_name(gemm) + " (cuDNN's RNN is set up with fp32 data and its default math; the " +
                          "GEMM autocast covers impl ours)");
      return;
    case Op::multihead_attention: case Op::gelu: case Op::position_embedding: case Op::lm_head:
      return;
    default:
      throw Unsupported(std::string("layer ") + op_name(l.op()) + " has no CUDA sequence implementation (the GPU " +
                        "sequence trainer runs embedding, rnn, lstm, select, linear, relu, gelu, add, layer norm, " +
                        "dropout, positional encoding, position embedding, multi-head attention and the tied LM head)");
  }
}

std::unique_ptr<NodeOps> make_node_ops(Layer& l, const std::vector<Shape>& in, const DeviceParams& p, cudaStream_t s) {
  check_twin(l, p.gemm);
  switch (l.op()) {
    case Op::embedding: return std::make_unique<EmbeddingOps>(static_cast<Embedding&>(l), in[0], p, s);
    case Op::rnn_tanh: case Op::lstm: return std::make_unique<RecurrentOps>(static_cast<Recurrent&>(l), in, p, s);
    case Op::linear: return std::make_unique<LinearOps>(static_cast<Linear&>(l), in[0], p, s);
    case Op::layer_norm: return std::make_unique<LayerNormOps>(static_cast<LayerNorm&>(l), in[0], p, s);
    case Op::multihead_attention:
      return std::make_unique<AttentionOps>(static_cast<MultiheadAttention&>(l), in, p, s);
    case Op::position_embedding: case Op::lm_head: return make_gpt2_ops(l, in, p, s);
    default: return std::make_unique<PointwiseOps>(l, in[0], p, s);
  }
}

}  // namespace dlb::models::gpu_seq
