// The CUDA trainer (see models/trainer.h): the host model's layers mirrored on one GPU with cuDNN
// convolutions (dlb::cuda::CudnnConv2d, algorithm search per shape), cuBLAS for Linear and our
// kernels (kernels/cuda/nn_ops.h) for activations, pooling, bias, the losses and the optimizers.
// Parameters, gradients and optimizer state live in three flat device buffers.
//
// Input pipelines: pageable (host malloc batch, cudaMemcpy per step: the lecture's default), pinned
// (cudaMallocHost batch), prefetch (two pinned buffers; the next batch is gathered on the host and
// copied on a second stream while this one trains), resident (the dataset uploaded once, batches
// gathered on the device). With cuda_graph the step from the device batch to the optimizer update
// is captured once per batch size and replayed (graph_cache.h), as is infer_batch's forward and loss.
//
// Gradients are written (not accumulated) by backward: one backward per step after zero-grad is
// what PyTorch's loop computes, so zero-grad needs no kernel here.
//
// Mixed precision (TrainOptions::dtype, the policy of models/amp.h as torch.autocast applies it):
//  - fp32: fp32 tensors, no tensor cores (cuDNN FMA math, cuBLAS compute 32F).
//  - tf32: fp32 tensors, convolutions and Linear layers on TF32 tensor cores.
//  - fp16 / bf16: master weights, gradients and optimizer state stay fp32; after every optimizer
//    step the weights are cast once into a flat half copy, which the convs and Linear layers read.
//    Activations and their gradients are stored in the half type (conv/linear outputs are half;
//    ReLU, pooling, sigmoid, flatten keep their input's type); the input batch is cast on entry;
//    cuDNN and cuBLAS accumulate in fp32. The loss (log-softmax cross-entropy, MSE) is computed in
//    fp32 from the half logits. Parameter gradients come out of the layers in half and are cast to
//    the fp32 gradient buffer in one pass.
//  - fp16 adds GradScaler (defaults 2^16, x2 per 2000 finite steps, x0.5 and skip on inf/NaN): the
//    loss gradient is multiplied by the scale, the fp32 gradients are unscaled with an inf/NaN check
//    in one fused pass, the optimizer kernels skip the update when the flag is set, and the scale is
//    updated, all on the device (no host sync per step, so a CUDA graph captures it): gpu_scaler.h,
//    shared with the sequence trainer.
#include <cublas_v2.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "kernels/common/errors.h"
#include "kernels/cuda/amp_kernels.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/nn_ops.h"
#include "models/cuda/gpu_scaler.h"
#include "models/cuda/gpu_seq_trainer.h"
#include "models/cuda/graph_cache.h"
#include "models/half.h"
#include "models/loader/device_feed.h"
#include "models/plan.h"
#include "models/trainer.h"

namespace dlb::models {

namespace {

using cuda::DeviceBuffer;

// Where each host Param lives in the flat device buffers.
struct Slot {
  Param* host;
  std::size_t offset;
};

// The options checked (UsageError) and the case's device made current: the trainer's streams,
// events and buffers are made on it.
int checked_device(const OptimizerConfig& cfg, const TrainOptions& o) {
  if (cfg.kind != "sgd" && cfg.kind != "adam") throw UsageError("optimizer '" + cfg.kind + "': expected sgd or adam");
  if (o.dtype != DType::fp32 && o.dtype != DType::tf32 && !is_half(o.dtype))
    throw UsageError(std::string("--dtype ") + dtype_name(o.dtype) + ": GPU training runs fp32, tf32, fp16 or bf16");
  return cuda::use_device(o.device);
}

class GpuTrainer final : public Trainer {
 public:
  GpuTrainer(Model& m, const OptimizerConfig& cfg, const TrainOptions& o)
      : m_(m), cfg_(cfg), o_(o), dt_(o.dtype), st_(o.dtype == DType::tf32 ? DType::fp32 : o.dtype),
        half_(is_half(o.dtype)), scaling_(o.dtype == DType::fp16 && o.scaler.enabled), esz_(half_ ? 2 : 4),
        dev_(checked_device(cfg, o)) {
    cuda::reset_peak_device_bytes();
    const std::size_t before = cuda::current_device_bytes();
    // "model.to(device)": the parameters first, so model_device_bytes() matches the lecture's 0.48 MB.
    std::size_t total = 0;
    for (Param* p : m_.params()) {
      slots_.push_back({p, total});
      total += (p->size() + 63) / 64 * 64;  // 256-byte aligned slices
    }
    values_ = DeviceBuffer<float>(std::max<std::size_t>(total, 1));
    upload_params();
    model_bytes_ = cuda::current_device_bytes() - before;
    grads_ = DeviceBuffer<float>(values_.size());
    DLB_CUDA_CHECK(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
    state1_ = DeviceBuffer<float>(values_.size());
    DLB_CUDA_CHECK(cudaMemsetAsync(state1_.data(), 0, state1_.bytes(), stream_));
    if (cfg_.kind == "adam") {
      state2_ = DeviceBuffer<float>(values_.size());
      DLB_CUDA_CHECK(cudaMemsetAsync(state2_.data(), 0, state2_.bytes(), stream_));
    }
    scalars_ = DeviceBuffer<float>(4);  // [0] loss sum, [1] step counter (as int)
    DLB_CUDA_CHECK(cudaMemsetAsync(scalars_.data(), 0, scalars_.bytes(), stream_));
    if (half_) {
      vh_ = DeviceBuffer<std::uint16_t>(values_.size());
      gh_ = DeviceBuffer<std::uint16_t>(values_.size());
      DLB_CUDA_CHECK(cudaMemsetAsync(gh_.data(), 0, gh_.bytes(), stream_));  // the padding stays zero
      cast_weights();
    }
    scaler_ = GpuGradScaler(scaling_, o.scaler, stream_);
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  ~GpuTrainer() override {
    // Work in flight reads the buffers freed after this body. (The shared cuBLAS/cuDNN handles may
    // keep pointing at the streams destroyed after it: every call site binds its own stream first.)
    cudaStreamSynchronize(stream_);
    graphs_.clear();
    infer_graphs_.clear();
  }

  std::string describe() const override {
    std::string amp = dt_ == DType::fp32 ? "" : std::string(", ") + dtype_name(dt_) + (half_ ? " autocast" : " math");
    if (scaling_) amp += " + loss scaling";
    return o_.device + " (cuDNN + cuBLAS" + amp + ", input " + input_mode_name(o_.input) +
           (o_.cuda_graph ? ", CUDA graph" : "") + ")";
  }
  float loss_scale() override { return scaler_.read_scale(); }
  std::size_t model_device_bytes() const override { return model_bytes_; }
  std::size_t peak_device_bytes() const override { return cuda::peak_device_bytes(); }

  void sync_to_host() override {
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const auto& s : slots_)
      DLB_CUDA_CHECK(cudaMemcpy(s.host->value.data(), values_.data() + s.offset, s.host->size() * sizeof(float),
                                cudaMemcpyDeviceToHost));
  }

  float train_batch(const Batch& b) override {
    plan(b.n);
    upload_batch_sync(b);
    zero_loss();
    step(b.n);
    return read_loss();
  }

  float gradients(const Batch& b) override {
    plan(b.n);
    upload_batch_sync(b);
    zero_loss();
    forward(b.n);
    loss_and_backward(b.n);
    finish_gradients();
    scaler_.clear();  // no optimizer step follows: the inf/NaN flag the unscale pass may have set
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const auto& s : slots_)
      DLB_CUDA_CHECK(cudaMemcpy(s.host->grad.data(), grads_.data() + s.offset, s.host->size() * sizeof(float),
                                cudaMemcpyDeviceToHost));
    return read_loss();
  }

  // Forward only (Trainer::infer_batch): the batch copied in inside the call (as a served request's),
  // forward, the loss (its kernel also writes the logits' gradient into dout, unread). The image
  // models have no layer that acts differently in eval mode.
  float infer_batch(const Batch& b) override {
    plan(b.n);
    copy_in(b.x, b.labels ? b.labels : zeros(b.n), b.n, shapes_[0].per_item(), stream_);
    const auto body = [&] {
      zero_loss();
      forward(b.n);
      loss(b.n);
    };
    if (o_.cuda_graph) infer_graphs_.run(b.n, stream_, GraphCache::FirstCall::replayed, body);
    else body();
    return read_loss();
  }

  // One step from the case's first images with a region per part (CUDA events + NVTX, profiler.h).
  // Zero-grad is no kernel here (backward writes the gradients), so it has no region.
  float profile_step(const Dataset& d, int batch, Profiler& p) override {
    check(d, batch);
    const int n = int(std::min<std::size_t>(batch, d.size()));
    const std::size_t item = std::size_t(d.c) * d.h * d.w;
    plan(n);
    std::vector<std::uint32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0u);
    host_x_.resize(std::size_t(n) * item), host_y_.resize(n);
    p.bind_stream(stream_);
    zero_loss();
    prof_ = &p;
    try {
      ProfileScope st(&p, "step", "step");
      {
        ProfileScope r(&p, "data copy", "copy");
        gather_batch(d, idx, 0, n, host_x_.data(), host_y_.data());
        copy_in(host_x_.data(), host_y_.data(), n, item, stream_);
      }
      forward(n);
      loss_and_backward(n);
      {
        ProfileScope r(&p, "optimizer", "optimizer");
        finish_gradients();
        optimize();
      }
      ProfileScope r(&p, "sync", "sync");
      DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    } catch (...) {
      prof_ = nullptr;
      throw;
    }
    prof_ = nullptr;
    return read_loss();
  }

  void prepare(const Dataset& d, int batch) override {
    check(d, batch);
    if (o_.input == InputMode::resident) upload_dataset(d);
    const int last = int(d.size() % std::size_t(batch));
    for (int n : {last, batch}) {  // the full batch last: it stays the current plan
      if (n == 0) continue;
      plan(n);
      // A forward and backward on a zero batch (label 0): every conv's algorithm search runs now.
      // No optimizer step, and the loss sum is zeroed when an epoch starts.
      DLB_CUDA_CHECK(cudaMemsetAsync(x_.data(), 0, x_.bytes(), stream_));
      DLB_CUDA_CHECK(cudaMemsetAsync(y_.data(), 0, y_.bytes(), stream_));
      forward(n);
      loss_and_backward(n);
    }
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  double train_epoch(const Dataset& d, int batch) override {
    check(d, batch);
    const auto idx = epoch_order(d.size(), o_.shuffle_seed++);
    const std::size_t item = std::size_t(d.c) * d.h * d.w;
    const std::size_t steps = (d.size() + batch - 1) / batch;
    zero_loss();
    if (o_.input == InputMode::resident) {
      upload_dataset(d);
      idx_dev_ = DeviceBuffer<std::uint32_t>(idx.size());
      DLB_CUDA_CHECK(cudaMemcpyAsync(idx_dev_.data(), idx.data(), idx.size() * 4, cudaMemcpyHostToDevice, stream_));
    }
    for (std::size_t st = 0, first = 0; st < steps; ++st, first += batch) {
      const int n = int(std::min<std::size_t>(batch, d.size() - first));
      plan(n);
      switch (o_.input) {
        case InputMode::resident:
          cuda::gather_batch(data_x_.data(), data_y_.data(), idx_dev_.data(), first, n, item, x_.data(), y_.data(), stream_);
          break;
        case InputMode::pageable:
          host_x_.resize(std::size_t(batch) * item), host_y_.resize(batch);
          gather_batch(d, idx, first, n, host_x_.data(), host_y_.data());
          copy_in(host_x_.data(), host_y_.data(), n, item, stream_);
          break;
        case InputMode::pinned: {
          pinned_[0].ensure(std::size_t(batch) * (item * 4 + 4));
          auto* px = static_cast<float*>(pinned_[0].data());
          auto* py = reinterpret_cast<std::int32_t*>(px + std::size_t(batch) * item);
          DLB_CUDA_CHECK(cudaEventSynchronize(consumed_[0]));  // the previous copy out of this buffer is done
          gather_batch(d, idx, first, n, px, py);
          copy_in(px, py, n, item, stream_);
          DLB_CUDA_CHECK(cudaEventRecord(consumed_[0], stream_));
          break;
        }
        case InputMode::prefetch:
          prefetch_step(d, idx, st, first, n, batch, item, steps);
          break;
      }
      step(n);
    }
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return read_loss() / double(steps);
  }

  // Fed by the loader (never run on a GPU yet): each batch through a DeviceFeed, copied on its own
  // stream (non-blocking; a DMA from pinned memory when the loader pins) while the previous step runs,
  // the step waiting for its copy on the device. The step reads x_/y_ (a captured graph too), so the
  // batch moves into them device to device on the step's stream: 0.8 MB at batch 64, ~1 us.
  double train_epoch(loader::Loader& l) override {
    check_loader(m_, l);
    const loader::Source& src = l.source();
    const std::size_t item = std::size_t(src.channels()) * src.height() * src.width();
    loader::DeviceFeed feed(l, dev_, static_cast<cudaStream_t>(stream_), /*non_blocking*/ true);
    zero_loss();
    std::size_t steps = 0;
    while (const loader::DeviceBatch* b = feed.next()) {
      plan(b->n);
      DLB_CUDA_CHECK(cudaMemcpyAsync(x_.data(), b->x, std::size_t(b->n) * item * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      DLB_CUDA_CHECK(cudaMemcpyAsync(y_.data(), b->labels, std::size_t(b->n) * sizeof(std::int32_t), cudaMemcpyDeviceToDevice, stream_));
      step(b->n);
      ++steps;
    }
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return read_loss() / double(std::max<std::size_t>(1, steps));
  }

  double evaluate(const Dataset& d, int batch) override {
    check(d, batch);
    const std::size_t item = std::size_t(d.c) * d.h * d.w;
    std::size_t right = 0;
    double loss = 0;
    std::vector<float> out;
    for (std::size_t first = 0; first < d.size(); first += batch) {
      const int n = int(std::min<std::size_t>(batch, d.size() - first));
      plan(n);
      Batch b{d.images.data() + first * item, d.labels.data() + first, nullptr, n};
      upload_batch_sync(b);
      forward(n);
      out.resize(shapes_.back().size());
      const float* logits = static_cast<const float*>(act(acts_.size() - 1));
      if (half_) {
        if (out32_.size() < out.size()) out32_ = DeviceBuffer<float>(out.size());
        from_half(acts_.back().data(), out32_.data(), out.size());
        logits = out32_.data();
      }
      DLB_CUDA_CHECK(cudaMemcpyAsync(out.data(), logits, out.size() * 4, cudaMemcpyDeviceToHost, stream_));
      DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      const int classes = int(out.size() / n);
      if (m_.loss() == LossKind::mse) {
        loss += double(loss_forward_backward(LossKind::mse, out.data(), b, out.size(), classes, nullptr)) * n;
        continue;
      }
      for (int i = 0; i < n; ++i) {
        const float* z = out.data() + std::size_t(i) * classes;
        right += int(std::max_element(z, z + classes) - z) == d.labels[first + i];
      }
    }
    return m_.loss() == LossKind::mse ? loss / d.size() : double(right) / d.size();
  }

 private:
  Model& m_;
  OptimizerConfig cfg_;
  TrainOptions o_;
  DType dt_, st_;       // autocast dtype; storage dtype of activations (fp32 for fp32 and tf32)
  bool half_, scaling_;  // fp16/bf16 storage; fp16 with the loss scaler
  std::size_t esz_;     // bytes per stored activation element
  int dev_;             // selected (cudaSetDevice) before the streams and events below are made on it
  cuda::Stream stream_, copy_stream_;
  cuda::Event copied_[2] = {cuda::Event(false), cuda::Event(false)}, consumed_[2] = {cuda::Event(false), cuda::Event(false)};
  std::vector<Slot> slots_;
  DeviceBuffer<float> values_, grads_, state1_, state2_, scalars_, out32_;
  GpuGradScaler scaler_;  // fp16: the loss scale, found_inf (gpu_scaler.h)
  DeviceBuffer<std::uint16_t> vh_, gh_, xh_;  // half weights, half gradients, half input (fp16/bf16)
  std::size_t model_bytes_ = 0;
  // Per batch size n: shapes, activations and gradients, cuDNN plans, pool indices. The members
  // hold the current n's; the others wait in plans_ (their device addresses unchanged, so a CUDA
  // graph captured for that n stays valid and an epoch's partial last batch costs no reallocation).
  struct PlanBuffers {
    std::vector<Shape> shapes;
    std::vector<Step> steps;
    std::vector<DeviceBuffer<std::uint8_t>> acts, dxs, dout;
    std::vector<DeviceBuffer<std::int32_t>> pool_arg;
  };
  int planned_n_ = -1;
  std::vector<Shape> shapes_;  // per value: 0 the input, i + 1 layer i's output
  std::vector<Step> steps_;    // the plan's (models/plan.h): one StepKind::layer step per layer
  std::vector<DeviceBuffer<std::uint8_t>> acts_, dxs_, dout_;  // storage dtype, esz_ bytes per element
  std::vector<DeviceBuffer<std::int32_t>> pool_arg_;
  std::map<int, PlanBuffers> plans_;
  std::map<std::pair<int, int>, std::unique_ptr<cuda::CudnnConv2d>> convs_;  // (layer, n)
  DeviceBuffer<float> x_, xs_[2];
  DeviceBuffer<std::int32_t> y_, ys_[2];
  GraphCache graphs_, infer_graphs_;  // cuda_graph: the training step's, the forward's (per n)
  // Input pipelines.
  std::vector<float> host_x_;
  std::vector<std::int32_t> host_y_;
  cuda::PinnedBuffer pinned_[2];
  DeviceBuffer<float> data_x_;
  DeviceBuffer<std::int32_t> data_y_;
  DeviceBuffer<std::uint32_t> idx_dev_;
  const Dataset* resident_ = nullptr;
  int batch_cap_ = 0;

  // Parameter i as the layers read it (the half copy under fp16/bf16) and its gradient as the
  // layers write it (half under fp16/bf16, cast to grads_ by finish_gradients()).
  const void* val(std::size_t i) const {
    return half_ ? static_cast<const void*>(vh_.data() + slots_[i].offset) : values_.data() + slots_[i].offset;
  }
  void* grd(std::size_t i) {
    return half_ ? static_cast<void*>(gh_.data() + slots_[i].offset) : grads_.data() + slots_[i].offset;
  }
  void* act(std::size_t i) { return acts_[i].data(); }
  void* dxs(std::size_t i) { return dxs_[i].data(); }
  DeviceBuffer<std::uint8_t> stored(std::size_t elements) const { return DeviceBuffer<std::uint8_t>(elements * esz_); }

  void to_half(const float* src, std::uint16_t* dst, std::size_t n) {
    if (dt_ == DType::fp16) cuda::amp_cast_fp32_to_fp16(src, dst, n, stream_);
    else cuda::amp_cast_fp32_to_bf16(src, dst, n, stream_);
  }
  void from_half(const void* src, float* dst, std::size_t n) {
    const auto* h = static_cast<const std::uint16_t*>(src);
    if (dt_ == DType::fp16) cuda::amp_cast_fp16_to_fp32(h, dst, n, stream_);
    else cuda::amp_cast_bf16_to_fp32(h, dst, n, stream_);
  }
  // The half copy of the weights the next forward reads (after init and every optimizer step).
  void cast_weights() { to_half(values_.data(), vh_.data(), values_.size()); }

  void upload_params() {
    for (const auto& s : slots_)
      DLB_CUDA_CHECK(cudaMemcpyAsync(values_.data() + s.offset, s.host->value.data(), s.host->size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream_));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void check(const Dataset& d, int batch) const {
    if (batch <= 0) throw UsageError("batch size must be positive, got " + std::to_string(batch));
    const Shape in = m_.input_shape(1);
    if (d.c != in.c() || d.h != in.h() || d.w != in.w())
      throw InputError("dataset '" + d.name + "' does not have the " + in.str().substr(2) + " images model " + m_.name() + " expects");
    if (d.size() == 0) throw InputError("dataset '" + d.name + "' is empty");
  }

  void zero_loss() { DLB_CUDA_CHECK(cudaMemsetAsync(scalars_.data(), 0, sizeof(float), stream_)); }
  float read_loss() {
    float l = 0;
    DLB_CUDA_CHECK(cudaMemcpyAsync(&l, scalars_.data(), sizeof(float), cudaMemcpyDeviceToHost, stream_));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return l;
  }

  // Buffers for batch n, kept per n (PlanBuffers). Input buffers are sized for the largest batch
  // seen so the partial last batch of an epoch reuses them; growing them invalidates the graphs.
  void plan(int n) {
    if (n == planned_n_) return;
    if (planned_n_ > 0)
      plans_[planned_n_] = PlanBuffers{std::move(shapes_), std::move(steps_), std::move(acts_), std::move(dxs_),
                                       std::move(dout_), std::move(pool_arg_)};
    if (auto it = plans_.find(n); it != plans_.end()) {
      PlanBuffers& p = it->second;
      shapes_ = std::move(p.shapes), steps_ = std::move(p.steps), acts_ = std::move(p.acts), dxs_ = std::move(p.dxs);
      dout_ = std::move(p.dout);
      pool_arg_ = std::move(p.pool_arg);
      plans_.erase(it);
    } else {
      const auto layers = m_.layers();
      Plan plan = make_plan(m_, n, dt_, Device::cuda);
      for (std::size_t i = 0; i < layers.size(); ++i)  // a chain: layer i reads value i, layer i - 1's output
        if (m_.nodes()[i].in != std::vector<int>{int(i)})
          throw Unsupported("the CUDA trainer runs chains of layers; " + m_.name() + "'s " + m_.layer_name(i) +
                            " reads another value");
      shapes_ = std::move(plan.shapes), steps_ = std::move(plan.steps);
      acts_.clear(), dxs_.clear(), pool_arg_.clear(), dout_.clear();
      for (std::size_t i = 0; i < layers.size(); ++i) {
        acts_.push_back(stored(shapes_[i + 1].size()));
        dxs_.push_back(stored(i == 0 ? 0 : shapes_[i].size()));
        pool_arg_.emplace_back(layers[i]->op() == Op::max_pool2d ? shapes_[i + 1].size() : 0);
      }
      dout_.push_back(stored(shapes_.back().size()));
    }
    if (n > batch_cap_) {
      DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));  // work in flight may still read the old ones
      batch_cap_ = n;
      x_ = DeviceBuffer<float>(shapes_[0].size());
      y_ = DeviceBuffer<std::int32_t>(n);
      if (half_) xh_ = DeviceBuffer<std::uint16_t>(shapes_[0].size());
      graphs_.clear();
      infer_graphs_.clear();
    }
    planned_n_ = n;
  }

  cuda::CudnnConv2d& conv(std::size_t layer, const Conv2dShape& s) {
    auto& c = convs_[{int(layer), s.n}];
    if (!c) c = std::make_unique<cuda::CudnnConv2d>(s, dt_);
    return *c;
  }

  void copy_in(const float* x, const std::int32_t* y, int n, std::size_t item, cudaStream_t s) {
    DLB_CUDA_CHECK(cudaMemcpyAsync(x_.data(), x, std::size_t(n) * item * sizeof(float), cudaMemcpyHostToDevice, s));
    DLB_CUDA_CHECK(cudaMemcpyAsync(y_.data(), y, std::size_t(n) * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
  }

  void upload_batch_sync(const Batch& b) {
    const std::size_t item = shapes_[0].per_item();
    copy_in(b.x, b.labels ? b.labels : zeros(b.n), b.n, item, stream_);
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  const std::int32_t* zeros(int n) {
    host_y_.assign(n, 0);
    return host_y_.data();
  }

  void upload_dataset(const Dataset& d) {
    if (resident_ == &d) return;
    data_x_ = DeviceBuffer<float>(d.images.size());
    data_y_ = DeviceBuffer<std::int32_t>(d.labels.size());
    data_x_.upload(d.images.data(), d.images.size(), stream_);
    data_y_.upload(d.labels.data(), d.labels.size(), stream_);
    resident_ = &d;
  }

  // Batch st+1 is gathered into pinned_[k] and copied to the staging buffers xs_[k]/ys_[k] on
  // copy_stream_ while batch st trains; the step itself always reads x_/y_, filled from the staging
  // buffer by a device-to-device copy on the compute stream (so x_ is only ever written in stream
  // order). copied_[k]: the upload into slot k finished; consumed_[k]: slot k was copied out.
  void prefetch_step(const Dataset& d, const std::vector<std::uint32_t>& idx, std::size_t st, std::size_t first, int n,
                     int batch, std::size_t item, std::size_t steps) {
    for (auto& p : pinned_) p.ensure(std::size_t(batch) * (item * 4 + 4));
    for (int k = 0; k < 2; ++k)
      if (xs_[k].size() < std::size_t(batch) * item) {
        DLB_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
        xs_[k] = DeviceBuffer<float>(std::size_t(batch) * item);
        ys_[k] = DeviceBuffer<std::int32_t>(batch);
      }
    auto issue = [&](std::size_t s, std::size_t f, int nn) {
      const int k = int(s % 2);
      auto* px = static_cast<float*>(pinned_[k].data());
      auto* py = reinterpret_cast<std::int32_t*>(px + std::size_t(batch) * item);
      DLB_CUDA_CHECK(cudaEventSynchronize(copied_[k]));  // the last upload out of pinned_[k] finished
      gather_batch(d, idx, f, nn, px, py);
      DLB_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, consumed_[k], 0));  // slot k was copied out
      DLB_CUDA_CHECK(cudaMemcpyAsync(xs_[k].data(), px, std::size_t(nn) * item * 4, cudaMemcpyHostToDevice, copy_stream_));
      DLB_CUDA_CHECK(cudaMemcpyAsync(ys_[k].data(), py, std::size_t(nn) * 4, cudaMemcpyHostToDevice, copy_stream_));
      DLB_CUDA_CHECK(cudaEventRecord(copied_[k], copy_stream_));
    };
    if (st == 0) issue(0, 0, n);
    if (st + 1 < steps) issue(st + 1, first + batch, int(std::min<std::size_t>(batch, d.size() - first - batch)));
    const int k = int(st % 2);
    DLB_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied_[k], 0));
    DLB_CUDA_CHECK(cudaMemcpyAsync(x_.data(), xs_[k].data(), std::size_t(n) * item * 4, cudaMemcpyDeviceToDevice, stream_));
    DLB_CUDA_CHECK(cudaMemcpyAsync(y_.data(), ys_[k].data(), std::size_t(n) * 4, cudaMemcpyDeviceToDevice, stream_));
    DLB_CUDA_CHECK(cudaEventRecord(consumed_[k], stream_));
  }

  // One training step from x_/y_: forward, loss, backward, optimizer; captured once per n in graph
  // mode (the first call's eager warm-up is that step).
  void step(int n) {
    if (!o_.cuda_graph) return step_body(n);
    graphs_.run(n, stream_, GraphCache::FirstCall::eager, [&] { step_body(n); });
  }

  void step_body(int n) {
    forward(n);
    loss_and_backward(n);
    finish_gradients();
    optimize();
  }

  // The model's input as the first layer reads it: x_ itself, or its half copy under fp16/bf16.
  const void* input() const { return half_ ? static_cast<const void*>(xh_.data()) : x_.data(); }

  // C[m, n] = op(A) op(B) in cuBLAS's column-major terms, in the storage dtype with fp32
  // accumulation (tf32: TF32 tensor cores; fp32: plain FMA, no TF32).
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda, const void* b,
            int ldb, void* c, int ldc) {
    cublasHandle_t h = cuda::cublas_handle_on(stream_);
    const cudaDataType_t t = st_ == DType::fp16 ? CUDA_R_16F : st_ == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    // The shared handle keeps cuBLAS's default math mode, so COMPUTE_32F never uses TF32 for fp32
    // inputs (and does use tensor cores for half inputs).
    const cublasComputeType_t ct = dt_ == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.f, zero = 0.f;
    DLB_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, a, t, lda, b, t, ldb, &zero, c, t, ldc, ct, CUBLAS_GEMM_DEFAULT));
  }

  void forward(int n) {
    (void)n;
    const auto layers = m_.layers();
    std::size_t pi = 0;  // index into slots_
    if (half_) to_half(x_.data(), xh_.data(), shapes_[0].size());
    const void* cur = input();
    std::optional<ProfileScope> phase;
    if (prof_) phase.emplace(prof_, "forward", "phase");
    for (const Step& st : steps_) {
      if (st.kind != StepKind::layer) throw Unsupported(std::string("step ") + step_kind_name(st.kind) + " on the GPU");
      const std::size_t i = std::size_t(st.node);
      Layer* l = layers[i];
      const Shape& in = shapes_[i];
      std::optional<ProfileScope> region;
      if (prof_) region.emplace(prof_, "forward " + st.name, "forward", st.name, st.fwd_flops);
      void* y = act(i);
      switch (l->op()) {
      case Op::conv2d: {
        auto* c = static_cast<Conv2d*>(l);
        const Conv2dShape s = c->conv_shape(in);
        if (!half_) {
          conv(i, s).forward(cur, val(pi), val(pi + 1), y, stream_);
        } else {  // half bias through our kernel: cuDNN's AddTensor may refuse bf16 (NOT_SUPPORTED)
          conv(i, s).forward(cur, val(pi), nullptr, y, stream_);
          cuda::bias_nchw_forward(y, val(pi + 1), s.n, c->out_c, s.p() * s.q(), st_, stream_);
        }
        pi += 2;
        break;
      }
      case Op::conv_transpose2d: {
        auto* c = static_cast<ConvTranspose2d*>(l);
        const Conv2dShape s = c->conv_shape(in);
        conv(i, s).backward_data(cur, val(pi), y, stream_);
        cuda::bias_nchw_forward(y, val(pi + 1), s.n, c->out_c, s.h * s.w, st_, stream_);
        pi += 2;
        break;
      }
      case Op::linear: {
        auto* f = static_cast<Linear*>(l);
        const int rows = f->rows(in);
        // column-major view: y^T[out, rows] = op(W)[out, in] * x^T[in, rows]
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, f->out_f, rows, f->in_f, val(pi), f->in_f, cur, f->in_f, y, f->out_f);
        cuda::bias_rows_forward(y, val(pi + 1), rows, f->out_f, st_, stream_);
        pi += 2;
        break;
      }
      case Op::relu: cuda::relu_forward(cur, y, in.size(), st_, stream_); break;
      case Op::sigmoid: cuda::sigmoid_forward(cur, y, in.size(), st_, stream_); break;
      case Op::max_pool2d:
        cuda::maxpool2d_forward(cur, y, pool_arg_[i].data(), in.n(), in.c(), in.h(), in.w(), static_cast<MaxPool2d*>(l)->k,
                                st_, stream_);
        break;
      case Op::flatten: DLB_CUDA_CHECK(cudaMemcpyAsync(y, cur, in.size() * esz_, cudaMemcpyDeviceToDevice, stream_)); break;
      default: throw Unsupported(std::string("layer ") + op_name(l->op()) + " has no CUDA implementation");
      }
      cur = y;
    }
  }

  // The loss added to scalars_[0], its gradient (times the loss scale) written to dout; returns dout.
  void* loss(int n) {
    const Shape& o = shapes_.back();
    const float* scale = scaler_.scale();  // the loss gradient carries the scale (null: not scaling)
    void* dlogits = dout_.front().data();
    std::optional<ProfileScope> region;
    if (prof_) region.emplace(prof_, "loss", "loss");
    if (m_.loss() == LossKind::cross_entropy)
      cuda::softmax_xent(act(acts_.size() - 1), y_.data(), n, int(o.per_item()), dlogits, scalars_.data(), st_, scale,
                         stream_);
    else
      cuda::mse(act(acts_.size() - 1), x_.data(), o.size(), dlogits, scalars_.data(), st_, scale, stream_);
    return dlogits;
  }

  void loss_and_backward(int n) {
    const void* dlogits = loss(n);
    const auto layers = m_.layers();
    std::size_t pi = slots_.size();
    std::optional<ProfileScope> phase;
    if (prof_) phase.emplace(prof_, "backward", "phase");
    for (std::size_t si = steps_.size(); si-- > 0;) {
      const Step& st = steps_[si];
      const std::size_t i = std::size_t(st.node);
      Layer* l = layers[i];
      const Shape& in = shapes_[i];
      std::optional<ProfileScope> region;
      if (prof_) region.emplace(prof_, "backward " + st.name, "backward", st.name, st.bwd_flops);
      const void* xin = i == 0 ? input() : act(i - 1);
      const void* y = act(i);
      const void* dy = i + 1 == layers.size() ? dlogits : dxs(i + 1);
      void* dx = i == 0 ? nullptr : dxs(i);
      if (l->op() == Op::conv2d) {
        pi -= 2;
        auto* cl = static_cast<Conv2d*>(l);
        const Conv2dShape s = cl->conv_shape(in);
        auto& c = conv(i, s);
        if (!half_) {
          c.backward_filter(xin, dy, grd(pi), grd(pi + 1), stream_);
        } else {  // as in forward: the bias gradient by our reduction, not cudnnConvolutionBackwardBias
          c.backward_filter(xin, dy, grd(pi), nullptr, stream_);
          cuda::bias_nchw_backward(dy, grd(pi + 1), s.n, cl->out_c, s.p() * s.q(), st_, stream_);
        }
        if (dx) c.backward_data(dy, val(pi), dx, stream_);
      } else if (l->op() == Op::conv_transpose2d) {
        pi -= 2;
        auto* t = static_cast<ConvTranspose2d*>(l);
        const Conv2dShape s = t->conv_shape(in);
        auto& c = conv(i, s);
        c.backward_filter(dy, xin, grd(pi), nullptr, stream_);
        cuda::bias_nchw_backward(dy, grd(pi + 1), s.n, t->out_c, s.h * s.w, st_, stream_);
        if (dx) c.forward(dy, val(pi), nullptr, dx, stream_);
      } else if (l->op() == Op::linear) {
        pi -= 2;
        auto* f = static_cast<Linear*>(l);
        const int rows = f->rows(in);
        // dW^T[in, out] = x^T[in, rows] * dy[rows, out]
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, f->in_f, f->out_f, rows, xin, f->in_f, dy, f->out_f, grd(pi), f->in_f);
        cuda::bias_rows_backward(dy, grd(pi + 1), rows, f->out_f, st_, stream_);
        // dx^T[in, rows] = W^T[in, out] * dy^T[out, rows]
        if (dx) gemm(CUBLAS_OP_N, CUBLAS_OP_N, f->in_f, rows, f->out_f, val(pi), f->in_f, dy, f->out_f, dx, f->in_f);
      } else if (!dx) {
        // parameter-free first layer: nothing to propagate
      } else if (l->op() == Op::relu) {
        cuda::relu_backward(y, dy, dx, in.size(), st_, stream_);
      } else if (l->op() == Op::sigmoid) {
        cuda::sigmoid_backward(y, dy, dx, in.size(), st_, stream_);
      } else if (l->op() == Op::max_pool2d) {
        cuda::maxpool2d_backward(dy, pool_arg_[i].data(), dx, in.size(), shapes_[i + 1].size(), st_, stream_);
      } else if (l->op() == Op::flatten) {
        DLB_CUDA_CHECK(cudaMemcpyAsync(dx, dy, in.size() * esz_, cudaMemcpyDeviceToDevice, stream_));
      }
    }
  }

  // The fp32 gradients the optimizer reads: cast from the half gradients (fp16/bf16), then under
  // fp16 unscaled by 1/scale with the inf/NaN check (found_inf) in one fused pass.
  void finish_gradients() {
    if (half_) from_half(gh_.data(), grads_.data(), grads_.size());
    scaler_.unscale(grads_.data(), grads_.size());
  }

  Profiler* prof_ = nullptr;  // set during profile_step only

  void optimize() {
    // One launch over the flat buffers: the padding between slices holds zeros in every buffer.
    const float* skip = scaler_.skip();  // GradScaler: no step on inf/NaN
    if (cfg_.kind == "sgd") {
      cuda::sgd_momentum(values_.data(), grads_.data(), state1_.data(), values_.size(), cfg_.lr, cfg_.momentum, stream_,
                         skip);
    } else {
      int* t = reinterpret_cast<int*>(scalars_.data() + 1);
      cuda::increment(t, stream_, skip);
      cuda::adam(values_.data(), grads_.data(), state1_.data(), state2_.data(), values_.size(), cfg_.lr, cfg_.beta1,
                 cfg_.beta2, cfg_.eps, t, stream_, skip);
    }
    scaler_.update();
    if (half_) cast_weights();
  }
};

}  // namespace

std::unique_ptr<Trainer> make_gpu_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o) {
  std::string why;
  if (!cuda::device_available(&why)) throw Unsupported("no CUDA device: " + why);
  if (has_seq_ops(model)) return make_gpu_seq_trainer(model, opt, o);  // gpu_seq_trainer.cu
  return std::make_unique<GpuTrainer>(model, opt, o);
}

}  // namespace dlb::models
