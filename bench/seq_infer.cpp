// Suite seq, op=infer of ours (see seq_infer.h): forward-only latency of one batch in eval mode
// (dropout off), p50 / p99 over the timed calls (manual time: each call's own seconds), for every
// model of the zoo.
//  - CPU: Model::predict per call; verified by the output's loss against the fp64 reference.
//  - CUDA (cuda:N): the GPU trainer's infer_batch per call (models/trainer.h): the batch's host ->
//    device copy of its inputs and labels, the forward, the loss and the wait for the device are all
//    inside each timed call, as a served request's would be. Verified (which also warms up: plans,
//    cuDNN's algorithm search) by the GPU forward's loss against the CPU fp32 forward's loss from the
//    same weights on the same batch. The record keeps the trainer's device bytes: its peak includes
//    the gradient and optimizer buffers a trainer makes, so it overstates what inference needs.
//    impl=cudnn (rnn, lstm) runs cuDNN's RNN forward in inference mode (no reserve space); its
//    weight space is refilled from our flat parameters only when the optimizer's step count changed
//    since the last fill (gpu_seq_layers.cu: a refill is 16 small copies a layer, more than a
//    batch-1 forward), so the timed calls do not copy weights.
//    Ran on an H100 (2026-11-27), verified. --cuda-graph adds, per GPU case, the same call with the
//    forward and loss replayed from a CUDA graph (TrainOptions::cuda_graph, `cuda_graph: true`):
//    the copies in and the loss read stay outside it; verified as the eager one (the first call's
//    loss is the graph's). Not yet run on a GPU.
#include "bench/seq_infer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "bench/latency.h"
#include "bench/peer.h"
#include "bench/training_cases.h"
#include "kernels/common/verify.h"
#include "models/trainer.h"

namespace dlb::bench::seq {

namespace {

// The GPU forward's loss against the CPU's, both fp32: one number out of up to ~10 layers summed in
// other orders (cuBLAS's tiling, block-tree reductions, cuDNN's RNN kernels) agrees to ~1e-6
// relative; cuDNN's algorithm search may keep an FFT or Winograd convolution for the image models
// (up to ~1e-4 of the scale, as in the image suites' GPU check), hence 2e-4. A dropout left on or a
// wrong layer moves the loss by a percent or more.
constexpr double kGpuInferTolerance = 2e-4;

class InferCase final : public Case {
 public:
  InferCase(std::string model, Sizes s, std::string device, int batch, bool quick, bool cuda_graph)
      : name_(std::move(model)), s_(std::move(s)), device_(std::move(device)), batch_(batch), quick_(quick),
        cuda_graph_(cuda_graph) {}

  void setup() override {
    model_ = make_host_model();
    if (models::is_seq_model(name_)) {
      data_ = windows_for(s_, batch_);
      std::vector<std::uint32_t> order(data_->size());
      std::iota(order.begin(), order.end(), 0u);
      batcher_ = std::make_unique<models::SeqBatcher>(s_.c);
      batch_b_ = batcher_->gather(*data_, order, 0, batch_);
      items_ = double(batch_) * s_.c.tokens_per_sample();
    } else {
      const models::Shape in = model_->input_shape(1);
      images_ = training_data(std::size_t(batch_), in.c(), in.h(), in.w());
      batch_b_ = models::Batch{images_->images.data(), images_->labels.data(), nullptr, batch_};
      items_ = batch_;
    }
    model_->init(0);
    model_->set_step(false, 0);
    if (device_ == "cpu") return;
    models::TrainOptions o;
    o.device = device_;
    o.cuda_graph = cuda_graph_;
    try {
      trainer_ = models::make_trainer(*model_, models::default_optimizer(name_), o);
    } catch (const std::exception& e) {
      throw Unsupported(std::string("the GPU trainer refuses ") + name_ + ": " + e.what());
    }
  }

  CheckResult verify() override {
    if (trainer_) {
      // The CPU fp32 forward from the same weights (impl ours: the CPU has no cuDNN).
      std::unique_ptr<models::Model> cpu = make_host_model(true);
      cpu->copy_params_from(*model_);
      WorstError w;
      w.loss(trainer_->infer_batch(batch_b_), models::forward_loss(*cpu, batch_b_));
      return judge(w.err, kGpuInferTolerance, "forward loss (GPU fp32 vs the CPU's fp32 forward)");
    }
    // The output's loss against the fp64 reference's (which runs the same eval-mode forward).
    const float loss = models::forward_loss(*model_, batch_b_);
    model_->sync_ref();
    std::vector<double> x64;
    if (images_) x64.assign(batch_b_.x, batch_b_.x + model_->input_shape(batch_).size());
    WorstError w;
    w.loss(loss, model_->loss_ref(images_ ? x64.data() : nullptr, batch_b_));
    return judge(w.err, kSeqTolerance, "forward loss vs the fp64 reference");
  }

  double run() override {
    const auto t0 = std::chrono::steady_clock::now();
    if (trainer_) trainer_->infer_batch(batch_b_);
    else model_->predict(batch_b_);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lat_.push_back(s);
    return s;
  }
  bool manual_time() const override { return true; }  // each call's own time, kept for p50 / p99
  int repetitions() const override { return quick_ ? 2 : 0; }
  Work work() const override { return {model_ ? model_->forward_flops(batch_) : 0, 0, items_}; }
  Metric metric() const override { return images_ ? Metric::imgs_per_s : Metric::tokens_per_s; }
  void annotate(json& r) const override {
    put_latency(r, lat_);
    r["model_params"] = model_->num_params();
    if (!images_) r["dataset"] = s_.dataset;
    if (!trainer_) return;
    r["trainer"] = trainer_->describe();
    r["model_device_bytes"] = trainer_->model_device_bytes();
    r["peak_device_bytes"] = trainer_->peak_device_bytes();  // with the trainer's gradient and optimizer buffers
  }
  void teardown() override {
    trainer_.reset();
    model_.reset();
  }

 private:
  // The case's model; `cpu_impl`: a sequence model's recurrent layers as impl ours (the CPU check's).
  std::unique_ptr<models::Model> make_host_model(bool cpu_impl = false) const {
    if (!models::is_seq_model(name_)) return models::make_model(name_);
    models::SeqConfig c = s_.c;
    if (cpu_impl) c.impl = models::RnnImpl::ours;
    return models::make_seq_model(c);
  }

  std::string name_;
  Sizes s_;
  std::string device_;
  int batch_;
  bool quick_, cuda_graph_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Trainer> trainer_;  // cuda:N only
  std::shared_ptr<const models::TokenData> data_;
  std::unique_ptr<models::SeqBatcher> batcher_;
  std::shared_ptr<const models::Dataset> images_;
  models::Batch batch_b_;
  double items_ = 0;
  std::vector<double> lat_;
};

// The PyTorch peer's forward-only latency of an image model (bench/peers/pytorch_infer.py): our
// model's initial weights and the batch ours times are written to a bundle the peer loads into the
// seed's modules; its first record's loss (eval mode, the same batch) must equal our fp32 forward's
// within kPeerInferTolerance (that proves it is the same model on the same input), then each timed
// call is one "infer 1" request and its own latency, as ours.
class ImagePeerInferCase final : public PeerLatencyCase {
 public:
  ImagePeerInferCase(std::string model, std::string device, int batch)
      : PeerLatencyCase("infer 1"), name_(std::move(model)), device_(std::move(device)), batch_(batch) {}

  void setup() override {
    model_ = models::make_model(name_);
    model_->init(0);
    model_->set_step(false, 0);
    const models::Shape in = model_->input_shape(batch_);
    images_ = training_data(std::size_t(batch_), in.c(), in.h(), in.w());
    static std::atomic<int> serial{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("dlb-infer-peer-" + std::to_string(::getpid()) + "-" + std::to_string(serial++));
    std::filesystem::create_directories(dir_);
    json params = json::array();
    std::ofstream pf(dir_ / "params.f32", std::ios::binary);
    for (const models::Param* p : model_->params()) {
      params.push_back({{"name", p->name}, {"shape", p->shape}});
      pf.write(reinterpret_cast<const char*>(p->value.data()), std::streamsize(p->size() * sizeof(float)));
    }
    const bool ce = model_->loss() == models::LossKind::cross_entropy;
    std::ofstream(dir_ / "manifest.json")
        << json{{"model", name_}, {"input", {in.n(), in.c(), in.h(), in.w()}}, {"loss", ce ? "cross_entropy" : "mse"},
                {"params", params}}.dump();
    std::ofstream(dir_ / "inputs.f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(images_->images.data()), std::streamsize(in.size() * sizeof(float)));
    if (ce) {
      std::vector<std::int32_t> y(images_->labels.begin(), images_->labels.begin() + batch_);
      std::ofstream(dir_ / "labels.i32", std::ios::binary)
          .write(reinterpret_cast<const char*>(y.data()), std::streamsize(y.size() * sizeof(std::int32_t)));
    }
    if (!pf.flush()) throw Unsupported("pytorch peer: cannot write its bundle to " + dir_.string());
    try {
      peer_ = std::make_unique<PeerChild>("pytorch_infer.py",
                                          std::vector<std::string>{"--serve", "--bundle", dir_.string(), "--device", device_});
    } catch (...) {  // no torch, or the peer refused: the case is skipped or failed; leave no bundle behind
      std::filesystem::remove_all(dir_);
      dir_.clear();
      throw;
    }
  }
  CheckResult verify() override {
    const models::Batch b{images_->images.data(), images_->labels.data(), nullptr, batch_};
    WorstError w;
    w.loss(peer_->ready.at("loss").get<double>(), models::forward_loss(*model_, b));
    lat_.clear();
    return judge(w.err, kPeerInferTolerance, "the peer's forward loss vs ours (fp32, the same weights and batch)");
  }
  void teardown() override {
    peer_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  Work work() const override { return {model_ ? model_->forward_flops(batch_) : 0, 0, double(batch_)}; }
  Metric metric() const override { return Metric::imgs_per_s; }

 private:
  // One loss of a forward pass in fp32 on both sides, summed in other orders (oneDNN or our
  // convolutions against torch's; on a GPU cuDNN's FFT/Winograd choices): 2e-4 as the GPU check above.
  static constexpr double kPeerInferTolerance = kGpuInferTolerance;
  std::string name_, device_;
  int batch_;
  std::unique_ptr<models::Model> model_;
  std::shared_ptr<const models::Dataset> images_;
  std::filesystem::path dir_;
};

}  // namespace

std::unique_ptr<Case> make_infer_case(const std::string& model, const Sizes& s, const std::string& device, int batch,
                                      bool quick, bool cuda_graph) {
  return std::make_unique<InferCase>(model, s, device, batch, quick, cuda_graph);
}

std::unique_ptr<Case> make_image_peer_infer_case(const std::string& model, const std::string& device, int batch) {
  return std::make_unique<ImagePeerInferCase>(model, device, batch);
}

}  // namespace dlb::bench::seq
