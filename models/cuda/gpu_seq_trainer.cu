// The CUDA trainer of the sequence models (see gpu_seq_trainer.h): the host model's graph mirrored on
// one GPU, a device twin per node (gpu_seq_layers.h), fp32. Parameters, gradients and the optimizer
// state live in flat device buffers as in the image trainer; per batch size a plan holds every
// value's buffer and gradient and the twins with their scratch (kept per size: the suite's check at
// batch 2 and its timed batches alternate without reallocating).
// TrainOptions::dtype tf32 / bf16 / fp16: autocast of the GEMMs only (every twin's GEMM through
// cuda::gemm_f32: FAST_TF32 on the fp32 buffers, or bf16 / fp16 operands cast from them, fp32
// accumulation; gpu_seq_layers.h); storage, LayerNorm, softmax, the attention core, the cells and the loss stay
// fp32, so memory does not shrink as under PyTorch's autocast. fp16 adds dynamic loss scaling
// (TrainOptions::scaler, the image trainer's GradScaler: gpu_scaler.h): an fp16 operand flushes
// below 2^-24 (subnormals from 2^-14), and a gradient of 1e-6..1e-8 is common, so the logits'
// gradient is multiplied by the scale (2^16: such a gradient lands at 2^-4..2^-11), the flat
// gradient buffer unscaled with an inf/NaN check after backward, the optimizer step skipped on the
// device on inf/NaN (no step count either), and the scale updated; no host sync for any of it.
//
// One step (train_batch): the batch's inputs (token ids, initial states) and labels copied in,
// the dropout step number set on the host layers (Model::set_step: the same Philox masks as the CPU
// step, which keys them by the optimizer's step count; with cuda_graph the host keys at step 0 and
// the step's offset is added on the device, so a replayed step draws its own masks), the gradients
// zeroed (one memset: Embedding, the tied LM head and PositionEmbedding add into their weights'
// gradients), forward node by node,
// the fused softmax cross-entropy (mean over the rows) writing the logits' gradient, backward in
// reverse node order, (fp16) the unscale pass, then Adam, AdamW (decoupled weight decay: GPT-2's)
// or SGD with PyTorch's semantics over the flat buffers, their step counts on the device.
// A value read by several nodes (the residual branches, the encoder's memory) gets the sum of their
// gradients: the first (in backward order) writes it, the others write a spare buffer that is then
// added (cublasSaxpy); the spares are as big as the biggest such value (GPT-2's residual stream,
// B T C), not the logits.
// Activation checkpointing (the model's segments, GPT-2's blocks): see checkpoint_slots.
//
// Ran on an H100 (2026-11-27): its tests (tests/models/test_train_seq_gpu.cu,
// test_train_gpt2_gpu.cu) hold it against the CPU step and pass.
#include "models/cuda/gpu_seq_trainer.h"

#include <cublas_v2.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/nn_ops.h"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/rows.h"
#include "models/cuda/gpu_scaler.h"
#include "models/cuda/gpu_seq_layers.h"
#include "models/cuda/graph_cache.h"
#include "models/layers.h"

namespace dlb::models {

bool has_seq_ops(const Model& m) {
  for (const Node& n : m.nodes())
    if (gpu_seq::is_seq_op(n.layer->op())) return true;
  return false;
}

namespace {

using cuda::DeviceBuffer;

class GpuSeqTrainer final : public Trainer {
 public:
  GpuSeqTrainer(Model& m, const OptimizerConfig& cfg, const TrainOptions& o) : m_(m), cfg_(cfg), o_(o) {
    if (cfg.kind != "sgd" && cfg.kind != "adam" && cfg.kind != "adamw")
      throw UsageError("optimizer '" + cfg.kind + "': expected sgd, adam or adamw");
    if (o.dtype != DType::fp32 && o.dtype != DType::tf32 && o.dtype != DType::bf16 && o.dtype != DType::fp16)
      throw Unsupported(std::string("the GPU sequence trainer runs fp32, tf32, bf16 or fp16 GEMMs, not ") +
                        dtype_name(o.dtype));
    params_.gemm = o.dtype;
    if (o.cuda_graph && (o.dtype == DType::bf16 || o.dtype == DType::fp16))
      throw Unsupported("the GPU sequence trainer captures CUDA graphs with fp32 or tf32 GEMMs only (the 16-bit "
                        "GEMMs' operand copies grow with the largest shape, which a captured graph cannot follow)");
    if (m.loss() != LossKind::cross_entropy) throw Unsupported("the GPU sequence trainer computes cross-entropy only");
    for (const Node& n : m.nodes()) {
      check_node(n);
      if (n.layer->op() == Op::embedding && m.is_input(n.in[0]))
        for (int k = 0; k < m.num_inputs(); ++k)
          if (m.input_value(k) == n.in[0]) token_inputs_.push_back({k, static_cast<const Embedding&>(*n.layer).vocab});
    }
    cuda::use_device(o.device);
    stream_ = std::make_unique<cuda::Stream>();
    cuda::reset_peak_device_bytes();
    const std::size_t before = cuda::current_device_bytes();
    std::size_t total = 0;
    for (Param* p : m_.params()) {
      params_.offset[p] = total;
      total += (p->size() + 63) / 64 * 64;  // 256-byte aligned slices; the padding stays zero
    }
    values_ = DeviceBuffer<float>(std::max<std::size_t>(total, 1));
    DLB_CUDA_CHECK(cudaMemsetAsync(values_.data(), 0, values_.bytes(), s()));
    for (const auto& [p, off] : params_.offset)
      DLB_CUDA_CHECK(cudaMemcpyAsync(values_.data() + off, p->value.data(), p->size() * sizeof(float),
                                     cudaMemcpyHostToDevice, s()));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
    model_bytes_ = cuda::current_device_bytes() - before;
    grads_ = DeviceBuffer<float>(values_.size());
    state1_ = DeviceBuffer<float>(values_.size());
    state2_ = DeviceBuffer<float>(cfg_.kind != "sgd" ? values_.size() : 1);
    for (auto* b : {&grads_, &state1_, &state2_}) DLB_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), s()));
    scalars_ = DeviceBuffer<float>(4);  // [0] the loss, [1] Adam's / AdamW's step count (int), [2] the classifier's count (int)
    DLB_CUDA_CHECK(cudaMemsetAsync(scalars_.data(), 0, scalars_.bytes(), s()));
    scaler_ = GpuGradScaler(o.dtype == DType::fp16 && o.scaler.enabled, o.scaler, s());
    params_.values = values_.data(), params_.grads = grads_.data();
    if (o.cuda_graph) {  // (run)
      dropout_offset_ = DeviceBuffer<std::uint64_t>(1);
      DLB_CUDA_CHECK(cudaMemsetAsync(dropout_offset_.data(), 0, sizeof(std::uint64_t), s()));
      params_.dropout_offset = dropout_offset_.data();
    }
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
  }

  ~GpuSeqTrainer() override {
    if (stream_) cudaStreamSynchronize(s());  // work in flight reads the buffers freed after this body
    infer_graphs_.clear();
    step_graphs_.clear();
  }

  std::string describe() const override {
    const bool cudnn = cudnn_rnn() != nullptr;
    std::string gemms = o_.dtype == DType::fp32 ? "fp32" : std::string("fp32, GEMM operands ") +
                            dtype_name(o_.dtype) + " (" + cuda::gemm_f32_compute_name(o_.dtype) + ")";
    if (scaler_.enabled()) gemms += " + loss scaling";
    const char* graphs = !o_.cuda_graph                 ? ""
                         : step_graph_refusal().empty() ? ", forward and training step in CUDA graphs"
                                                        : ", forward in a CUDA graph";
    return o_.device + (cudnn ? " (cuDNN RNN + cuBLAS + our sequence kernels, " : " (cuBLAS + our sequence kernels, ") +
           gemms + graphs + ")";
  }
  std::size_t model_device_bytes() const override { return model_bytes_; }
  float loss_scale() override { return scaler_.read_scale(); }
  std::size_t peak_device_bytes() const override { return cuda::peak_device_bytes(); }

  float train_batch(const Batch& b) override { return run(b, true); }

  float gradients(const Batch& b) override {
    const float loss = run(b, false);
    download_gradients();
    return loss;
  }

  float profile_gradients(const Batch& b, Profiler& prof) override {
    prof.bind_stream(s());
    prof_ = &prof;
    float loss = 0;
    try {
      ProfileScope step(prof_, "step", "step");
      loss = run(b, false);
    } catch (...) {
      prof_ = nullptr;
      throw;
    }
    prof_ = nullptr;
    download_gradients();
    return loss;
  }

  void download_gradients() {
    for (const auto& [p, off] : params_.offset)
      DLB_CUDA_CHECK(cudaMemcpyAsync(const_cast<Param*>(p)->grad.data(), grads_.data() + off, p->size() * sizeof(float),
                                     cudaMemcpyDeviceToHost, s()));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
  }

  // Forward only (Trainer::infer_batch): the inputs and labels copied in (part of the call, as a
  // served request's), eval mode (Model::set_step(false): dropout off, cuDNN's inference-mode RNN),
  // forward node by node, the classifier's loss without its gradient; no gradient or weight written.
  // With cuda_graph the forward and the loss are captured per batch size (graph_cache.h) and the
  // capture dropped by the next training step (cuDNN's weight space is refilled per step, on the
  // host's decision); the training step is captured too where it can be (run, step_graph_refusal).
  float infer_batch(const Batch& b) override {
    Plan& p = plan(b.n);
    upload(b, p);
    m_.set_step(false, steps_);
    const auto body = [&] {
      for (std::size_t k = 0; k < m_.nodes().size(); ++k) forward_node(p, k);
      const std::size_t out = p.shapes.size() - 1;
      cuda::seq::classifier_forward_backward(p.y[out], p.labels.data(), p.rows, p.classes, p.classes,
                                             p.losses.data(), nullptr, scalars_.data(),
                                             reinterpret_cast<int*>(scalars_.data() + 2), s());
    };
    if (o_.cuda_graph) infer_graphs_.run(b.n, s(), GraphCache::FirstCall::replayed, body);
    else body();
    float loss = 0;
    DLB_CUDA_CHECK(cudaMemcpyAsync(&loss, scalars_.data(), sizeof loss, cudaMemcpyDeviceToHost, s()));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
    return loss;
  }

  void sync_to_host() override {
    for (const auto& [p, off] : params_.offset)
      DLB_CUDA_CHECK(cudaMemcpyAsync(const_cast<Param*>(p)->value.data(), values_.data() + off,
                                     p->size() * sizeof(float), cudaMemcpyDeviceToHost, s()));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
  }

  using Trainer::train_epoch;  // the loader's: train_batch per batch (image batches: refused by the plan)
  double train_epoch(const Dataset&, int) override {
    throw Unsupported(m_.name() + ": a sequence model trains on token batches (train_batch), not an image dataset");
  }
  double evaluate(const Dataset&, int) override {
    throw Unsupported(m_.name() + ": a sequence model is evaluated on token batches, not an image dataset");
  }

 private:
  // Every value's buffer and gradient for one batch size, the nodes' input shapes and device twins.
  struct Plan {
    std::vector<Shape> shapes;
    std::vector<std::vector<Shape>> ins;  // per node
    std::vector<DeviceBuffer<float>> vals, grads;  // per value kept (int32 token ids share the 4-byte buffers)
    std::vector<DeviceBuffer<float>> slot_vals, slot_grads;  // checkpointing: slot k, shared by the segments
    std::vector<float*> y, dy;  // per value: its buffer and its gradient's (its own or its slot's)
    std::vector<int> recompute;  // per node: the first node of the checkpoint segment it ends, else -1
    std::vector<std::unique_ptr<gpu_seq::NodeOps>> ops;
    DeviceBuffer<float> spare[Layer::kMaxInputs];  // a further gradient of a value, before it is added
    DeviceBuffer<std::int32_t> labels;
    DeviceBuffer<float> losses;
    long rows = 0;
    int classes = 0;
  };

  cudaStream_t s() const { return stream_->get(); }

  void check_node(const Node& n) const {
    Layer& l = *n.layer;
    gpu_seq::check_twin(l, o_.dtype);
    if (auto* r = dynamic_cast<const Recurrent*>(&l))
      for (std::size_t k = 1; k < n.in.size(); ++k)
        if (!m_.is_input(n.in[k]))  // the twin computes no dh0 / dc0
          throw Unsupported(r->p[0].name +
                            ": an initial state made by another layer (the GPU trainer takes it as a model input)");
  }

  Plan& plan(int n) {
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    Plan p;
    p.shapes = m_.value_shapes(n);
    std::vector<int> readers(p.shapes.size(), 0);
    for (const Node& nd : m_.nodes())
      for (int v : nd.in) ++readers[std::size_t(v)];
    const std::vector<int> slot = checkpoint_slots(p);
    std::size_t biggest = 0;  // of the values read by several nodes: a spare holds one of their gradients
    for (std::size_t v = 0; v < p.shapes.size(); ++v) {
      const std::size_t size = p.shapes[v].size();
      const bool own = slot[v] < 0;
      p.vals.emplace_back(own ? size : 0);
      p.grads.emplace_back(own && !m_.is_input(int(v)) ? size : 0);
      if (readers[v] > 1 && !m_.is_input(int(v))) biggest = std::max(biggest, size);
      if (own) continue;
      const auto k = std::size_t(slot[v]);
      if (k >= p.slot_vals.size()) p.slot_vals.resize(k + 1), p.slot_grads.resize(k + 1);
      if (p.slot_vals[k].size() < size) {
        p.slot_vals[k] = DeviceBuffer<float>(size);
        p.slot_grads[k] = DeviceBuffer<float>(size);
      }
    }
    for (std::size_t v = 0; v < p.shapes.size(); ++v) {
      const bool own = slot[v] < 0;
      p.y.push_back(own ? p.vals[v].data() : p.slot_vals[std::size_t(slot[v])].data());
      p.dy.push_back(own ? p.grads[v].data() : p.slot_grads[std::size_t(slot[v])].data());
    }
    for (const Node& nd : m_.nodes()) {
      std::vector<Shape> in;
      for (int v : nd.in) in.push_back(p.shapes[std::size_t(v)]);
      p.ops.push_back(gpu_seq::make_node_ops(*nd.layer, in, params_, s()));
      p.ins.push_back(std::move(in));
    }
    for (auto& b : p.spare) b = DeviceBuffer<float>(std::max<std::size_t>(biggest, 1));
    const Shape& out = p.shapes.back();
    p.classes = out.last(), p.rows = long(out.size() / std::size_t(p.classes));
    p.labels = DeviceBuffer<std::int32_t>(std::size_t(p.rows));
    p.losses = DeviceBuffer<float>(std::size_t(p.rows));
    return plans_.emplace(n, std::move(p)).first->second;
  }

  // The device kernels index by token and label unchecked: a bad one is refused here, as the CPU
  // step refuses it (InputError).
  static void check_range(const std::int32_t* v, std::size_t n, int end, const std::string& what) {
    for (std::size_t i = 0; i < n; ++i)
      if (v[i] < 0 || v[i] >= end)
        throw InputError(what + " " + std::to_string(v[i]) + " at " + std::to_string(i) + " outside 0.." +
                         std::to_string(end - 1));
  }

  void upload(const Batch& b, Plan& p) {
    if (!b.labels) throw UsageError(m_.name() + ": a training batch needs its labels");
    check_range(b.labels, std::size_t(p.rows), p.classes, m_.name() + ": label");
    for (const auto& [k, vocab] : token_inputs_)
      if (const void* src = b.input(k))
        check_range(static_cast<const std::int32_t*>(src), p.shapes[std::size_t(m_.input_value(k))].size(), vocab,
                    m_.name() + ": token");
    for (int k = 0; k < m_.num_inputs(); ++k) {
      const int v = m_.input_value(k);
      const void* src = b.input(k);
      if (!src) throw UsageError(m_.name() + ": the batch lacks input " + std::to_string(k));
      DLB_CUDA_CHECK(cudaMemcpyAsync(p.y[std::size_t(v)], src, p.shapes[std::size_t(v)].size() * 4,
                                     cudaMemcpyHostToDevice, s()));
    }
    DLB_CUDA_CHECK(cudaMemcpyAsync(p.labels.data(), b.labels, std::size_t(p.rows) * 4, cudaMemcpyHostToDevice, s()));
  }

  // Why the training step cannot be captured in a CUDA graph ("" when it can): a replay repeats the
  // captured launches with their arguments, so nothing in the step may depend on the host's step
  // count. Adam's count is on the device (`scalars_`) and, with cuda_graph, so is the dropout masks'
  // offset (dropout_offset_); cuDNN's RNN refills its weight space on the host's decision; the fp16
  // loss scaler and 16-bit GEMM operands are refused with cuda_graph at construction.
  std::string step_graph_refusal() const {
    if (const Recurrent* r = cudnn_rnn())
      return r->p[0].name + ": cuDNN's RNN is not captured (its weight space is refilled per step): impl ours";
    return "";
  }
  // The model's first recurrent layer on cuDNN's RNN API (impl cudnn), else null.
  const Recurrent* cudnn_rnn() const {
    for (const Node& n : m_.nodes())
      if (auto* r = dynamic_cast<const Recurrent*>(n.layer.get()); r && r->impl == RnnImpl::cudnn) return r;
    return nullptr;
  }

  // zero-grad, forward, loss, backward (and the optimizer step when `optimize`); the batch's loss.
  // With cuda_graph a training step (optimize, not profiled) from the copied batch to the optimizer
  // update is captured once per batch size and replayed (GraphCache::FirstCall::eager: the first
  // call is the step, run eagerly, then captured), the inputs copied in before it, the dropout
  // offset set and the loss read after it, outside the graph.
  float run(const Batch& b, bool optimize) {
    infer_graphs_.clear();  // (above)
    Plan& p = plan(b.n);
    {
      ProfileScope r(prof_, "data copy", "copy");
      upload(b, p);
    }
    // The dropout masks of this optimizer step, as the CPU trainer draws them: keyed by steps_ on the
    // host, or (cuda_graph) at step 0 on the host plus this step's offset on the device. The key's
    // offset is step << 40 (models/layers/dropout.h), so step s adds key(s) - key(0), a multiple of 64.
    if (o_.cuda_graph) {
      m_.set_step(true, 0);
      cuda::seq::set_u64(dropout_offset_.data(), dropout_key(0, steps_).offset - dropout_key(0, 0).offset, s());
    } else {
      m_.set_step(true, steps_);
    }
    if (optimize && o_.cuda_graph && !prof_) {
      if (const std::string why = step_graph_refusal(); !why.empty()) throw Unsupported("--cuda-graph training: " + why);
      step_graphs_.run(b.n, s(), GraphCache::FirstCall::eager, [&] { step_body(p, true); });
    } else {
      step_body(p, optimize);
    }
    if (optimize) ++steps_;  // taken or skipped: the dropout masks' step number moves on (a new batch draws new masks)
    ProfileScope r(prof_, "sync", "sync");
    float loss = 0;
    DLB_CUDA_CHECK(cudaMemcpyAsync(&loss, scalars_.data(), sizeof loss, cudaMemcpyDeviceToHost, s()));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
    return loss;
  }

  // The device work of one step from the copied batch: what a training step's graph holds.
  void step_body(Plan& p, bool optimize) {
    {
      ProfileScope r(prof_, "zero_grad", "optimizer");
      DLB_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), s()));
    }
    {
      ProfileScope phase(prof_, "forward", "phase");
      for (std::size_t k = 0; k < m_.nodes().size(); ++k) forward_node(p, k);
    }
    const std::size_t out = p.shapes.size() - 1;
    {
      ProfileScope r(prof_, "loss", "loss");
      cuda::seq::classifier_forward_backward(p.y[out], p.labels.data(), p.rows, p.classes, p.classes,
                                             p.losses.data(), p.dy[out], scalars_.data(),
                                             reinterpret_cast<int*>(scalars_.data() + 2), s(), scaler_.scale());
    }
    {
      ProfileScope phase(prof_, "backward", "phase");
      backward(p);
    }
    scaler_.unscale(grads_.data(), grads_.size());  // fp16: every gradient unscaled, found_inf noted
    if (optimize) {
      ProfileScope r(prof_, "optimizer", "optimizer");
      step();
      scaler_.update();
    } else {
      scaler_.clear();  // no step follows: the gradients stay unscaled, the scale as it was
    }
  }

  // Node k's forward (`again`: a checkpoint segment's recompute, named so in a profile).
  void forward_node(Plan& p, std::size_t k, bool again = false) {
    const Node& nd = m_.nodes()[k];
    std::optional<ProfileScope> region;
    if (prof_) {
      const std::string name = m_.layer_name(k);
      region.emplace(prof_, (again ? "recompute " : "forward ") + name, "forward", name,
                     nd.layer->forward_flops(Shapes(p.ins[k].data(), int(p.ins[k].size()))));
    }
    const void* xs[Layer::kMaxInputs] = {};
    for (std::size_t j = 0; j < nd.in.size(); ++j) xs[j] = p.y[std::size_t(nd.in[j])];
    gpu_seq::NodeIo io{Shapes(p.ins[k].data(), int(p.ins[k].size())), xs, p.y[std::size_t(nd.out)]};
    p.ops[k]->forward(io);
  }

  // Checkpointing (Model::set_checkpointing, GPT-2's --checkpoint-activations: a segment per block):
  // the values a segment's nodes make, all but its last node's, share slot buffers (slot k: the k-th
  // node's output and its gradient, in every segment), and backward runs the segment's forward again
  // before its last node's backward. The twins' own scratch (LayerNorm's mean/rstd, attention's LSE)
  // stays per node and is rewritten with the same values. Napkin math, gpt2-124m B 4 T 1024: a
  // block's values are ~17 B T C floats (200 MB with their gradients' share), so 11 of 12 blocks'
  // worth (~2.4 GB with gradients) is not held, for one more forward of the blocks (~+33% FLOPs).
  // Returns per value its slot or -1; fills p.recompute.
  std::vector<int> checkpoint_slots(Plan& p) const {
    const auto& nodes = m_.nodes();
    std::vector<int> slot(p.shapes.size(), -1), owner(p.shapes.size(), -1);
    p.recompute.assign(nodes.size(), -1);
    if (!m_.checkpointing()) return slot;
    const auto& segs = m_.checkpoint_segments();
    for (std::size_t g = 0; g < segs.size(); ++g) {
      const auto [first, end] = segs[g];
      if (end - first < 2) continue;
      p.recompute[std::size_t(end - 1)] = first;
      for (int k = first; k < end - 1; ++k) {
        const auto v = std::size_t(nodes[std::size_t(k)].out);
        slot[v] = k - first, owner[v] = int(g);
      }
    }
    for (std::size_t k = 0; k < nodes.size(); ++k)  // a dropped value read outside its segment would be stale
      for (int v : nodes[k].in) {
        const int g = owner[std::size_t(v)];
        if (g >= 0 && (int(k) < segs[std::size_t(g)].first || int(k) >= segs[std::size_t(g)].second))
          throw Unsupported("model " + m_.name() + ": node " + std::to_string(k) + " reads a value checkpoint segment " +
                            std::to_string(g) + " drops");
      }
    return slot;
  }

  void backward(Plan& p) {
    const auto& nodes = m_.nodes();
    std::vector<char> written(p.shapes.size(), 0);
    written.back() = 1;  // the loss wrote the logits' gradient
    const void* xs[Layer::kMaxInputs] = {};
    for (std::size_t k = nodes.size(); k-- > 0;) {
      const Node& nd = nodes[k];
      const auto out = std::size_t(nd.out);
      if (p.recompute[k] >= 0)  // the end of a checkpoint segment: its dropped values again
        for (auto i = std::size_t(p.recompute[k]); i < k; ++i) forward_node(p, i, true);
      if (!written[out])  // a value no node read
        DLB_CUDA_CHECK(cudaMemsetAsync(p.dy[out], 0, p.shapes[out].size() * sizeof(float), s()));
      written[out] = 1;
      float* dxs[Layer::kMaxInputs] = {};
      int add_to[Layer::kMaxInputs] = {-1, -1, -1, -1};
      for (std::size_t j = 0; j < nd.in.size(); ++j) {
        const int v = nd.in[j];
        xs[j] = p.y[std::size_t(v)];
        if (m_.is_input(v)) continue;  // token ids, initial states: no gradient wanted
        if (!written[std::size_t(v)]) {
          dxs[j] = p.dy[std::size_t(v)], written[std::size_t(v)] = 1;
        } else {
          dxs[j] = p.spare[j].data(), add_to[j] = v;
        }
      }
      const Shapes in(p.ins[k].data(), int(p.ins[k].size()));
      gpu_seq::NodeIo io{in, xs, p.y[out], p.dy[out], dxs};
      {
        std::optional<ProfileScope> region;  // napkin: a backward is about twice its forward's FLOPs
        if (prof_)
          region.emplace(prof_, "backward " + m_.layer_name(k), "backward", m_.layer_name(k),
                         2 * nd.layer->forward_flops(in));
        p.ops[k]->backward(io);
      }
      const float one = 1.f;
      for (std::size_t j = 0; j < nd.in.size(); ++j)
        if (add_to[j] >= 0)
          DLB_CUBLAS_CHECK(cublasSaxpy(cuda::cublas_handle_on(s()), int(p.shapes[std::size_t(add_to[j])].size()), &one,
                                       p.spare[j].data(), 1, p.dy[std::size_t(add_to[j])], 1));
    }
  }

  // One launch over the flat buffers (the padding between slices holds zeros in each, and decay
  // keeps them zero). fp16: skipped on the device when the unscale pass found an inf/NaN (the step
  // counts of Adam and AdamW, their bias corrections, do not advance, as under PyTorch's GradScaler).
  void step() {
    const float* skip = scaler_.skip();  // null unless fp16 with the scaler
    int* t = reinterpret_cast<int*>(scalars_.data() + 1);
    if (cfg_.kind == "sgd") {
      cuda::sgd_momentum(values_.data(), grads_.data(), state1_.data(), values_.size(), cfg_.lr, cfg_.momentum, s(),
                         skip);
    } else if (cfg_.kind == "adamw") {  // the CPU optimizer's formula (kernels/cpu/seq/adamw.h), steps from 1
      const cpu::seq::AdamW h{cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay};
      cuda::increment(t, s(), skip);
      cuda::seq::adamw_step(values_.data(), grads_.data(), state1_.data(), state2_.data(), values_.size(), h, t, s(),
                            skip);
    } else {
      cuda::increment(t, s(), skip);
      cuda::adam(values_.data(), grads_.data(), state1_.data(), state2_.data(), values_.size(), cfg_.lr, cfg_.beta1,
                 cfg_.beta2, cfg_.eps, t, s(), skip);
    }
  }

  Model& m_;
  OptimizerConfig cfg_;
  TrainOptions o_;
  std::unique_ptr<cuda::Stream> stream_;  // made after the device is selected
  gpu_seq::DeviceParams params_;
  DeviceBuffer<float> values_, grads_, state1_, state2_, scalars_;
  GpuGradScaler scaler_;  // fp16: the loss scale and found_inf on the device (gpu_scaler.h)
  std::size_t model_bytes_ = 0;
  std::uint64_t steps_ = 0;  // train_batch calls (steps taken or skipped): the dropout masks' step number
  std::map<int, Plan> plans_;
  GraphCache infer_graphs_;  // cuda_graph: infer_batch's forward and loss, per batch size
  GraphCache step_graphs_;   // cuda_graph: the training step's device work (step_body), per batch size
  DeviceBuffer<std::uint64_t> dropout_offset_;  // cuda_graph: this step's dropout offset (run)
  Profiler* prof_ = nullptr;  // set during profile_gradients only
  std::vector<std::pair<int, int>> token_inputs_;  // (model input, vocabulary) of each input an Embedding reads
};

}  // namespace

std::unique_ptr<Trainer> make_gpu_seq_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o) {
  return std::make_unique<GpuSeqTrainer>(model, opt, o);
}

}  // namespace dlb::models
