// Suite "amp": mixed precision against fp32, the seed exercise "train with and without mixed
// precision; compare the training time and memory usage", done per model x batch x dtype.
//   op "train": one AMP training step (models/amp.h AmpTrainer: autocast policy, fp32 masters, fp32
//               optimizer, GradScaler for fp16) of a seed model. Verified against the fp32 run on
//               the same batches for `parity_steps` steps: in lockstep (each step from fp32's
//               weights) its loss within the dtype's tolerance and its gradients within 0.25 relative
//               L2 per tensor, and trained freely its loss within 5x the tolerance (LossParity says
//               why); fp32 itself: our layer-by-layer step against the model's own train_step, to
//               1e-5 every way. The CPU's fp32 row times the model's own train_step (training
//               without autocast: the baseline), the half types the AmpTrainer step (record
//               `timed_step`). The sequence models (rnn, lstm, transformer, --model; the seed's default
//               sizes, synthetic tokens, tokens/s) train the same way: under bf16 their Linear layers
//               and (where the CPU computes bf16) recurrent GEMMs and attention projections take
//               bf16 operands, while softmax, LayerNorm, the attention core, the recurrent cell's
//               gate math and state, and the loss stay fp32 (kernels/cpu/seq/rnn.h RnnShape::bf16,
//               MultiheadAttention::bf16); elsewhere bf16 is emulated (rounded operands).
//               On a GPU the step is the CUDA trainer's (models/cuda/gpu_trainer.cu: cuDNN/cuBLAS
//               in the autocast dtype, fp32 masters, device-side GradScaler for fp16), timed over an
//               epoch of `steps` device-resident batches; its parity reference is the CPU's fp32
//               train_step from the same weights on the same batches, trained freely (its weights
//               stay on the device: no lockstep). The sequence models there: the CUDA sequence
//               trainer (models/cuda/gpu_seq_trainer.cu), fp32, or tf32 / bf16 / fp16 as autocast of
//               the GEMMs alone (cuBLAS FAST_TF32; bf16 / fp16 operands cast: gemm_f32; LayerNorm,
//               softmax, the attention core, the cells and the loss fp32; records `autocast: "gemm
//               operands"` and `cublas_compute`; memory does not shrink), fp16 with the image
//               trainer's device-side GradScaler (models/cuda/gpu_scaler.h; `loss_scale` recorded),
//               one step per iteration, the same check (tolerance: the larger of 1e-2 and
//               kernels/common/autocast_tolerance.h's loss); impl=cudnn under autocast: Unsupported
//               (cuDNN's RNN stays fp32), skipped.
//   op "gemm":  C = A B with half-type inputs and fp32 accumulation (CPU: kernels/cpu/bf16_gemm.h;
//               GPU: cuBLAS GemmEx, TF32 via CUBLAS_COMPUTE_32F_FAST_TF32), against fp64.
//   ops "cast", "unscale" (GPU): our fp32->fp16/bf16 cast and fused unscale+inf/NaN check kernels
//               (kernels/cuda/amp_kernels.h), bit-checked against the host references, in GB/s.
//               The GPU gemm, cast and unscale cases live in bench/amp_kernels.cpp.
// Devices/dtypes: the CPU runs fp32 and bf16 (PyTorch's CPU autocast); CUDA devices run the train
// and gemm cases in fp32/tf32/fp16/bf16 and the kernel cases in fp16/bf16. `--dtype fp16` on a CPU-only run is a usage error (exit 2).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>

#include "bench/suite.h"
#include "bench/amp_kernels.h"
#include "bench/markdown.h"
#include "bench/napkin.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/onednn/onednn.h"
#include "models/amp.h"
#include "models/data.h"
#include "kernels/common/autocast_tolerance.h"
#include "models/half.h"
#include "models/net.h"
#include "models/seq_zoo.h"
#include "models/trainer.h"

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cublas_gemm.h"
#endif


namespace dlb::bench {

namespace {

// ---- data: seeded synthetic CIFAR-shaped images, centre-cropped / channel-averaged to the model's
// input shape, cached per shape for the run ----
struct AmpData {
  int c, h, w;
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

std::shared_ptr<const AmpData> amp_data(std::size_t n, int c, int h, int w) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const AmpData>> cache;
  const std::string key = std::to_string(n) + "/" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (h > 32 || w > 32 || (c != 1 && c != 3)) throw Unsupported("amp suite: no synthetic data for input " + key);
  const models::Split s = models::synthetic_cifar10(n, 0, 5);
  auto d = std::make_shared<AmpData>();
  d->c = c, d->h = h, d->w = w, d->labels = s.train.labels;
  d->images.resize(n * c * h * w);
  const int oy = (32 - h) / 2, ox = (32 - w) / 2;
  for (std::size_t i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          float v = 0;
          for (int sc = (c == 3 ? ch : 0); sc < (c == 3 ? ch + 1 : 3); ++sc)
            v += s.train.images[((i * 3 + sc) * 32 + y + oy) * 32 + x + ox];
          d->images[((i * c + ch) * h + y) * w + x] = c == 3 ? v : v / 3;
        }
  cache.clear();  // keep one shape alive: the sweep runs a model's cases together
  cache[key] = d;
  return d;
}

// The sequence models (models/seq_zoo.h, the seed's default sizes): `count` batches of `n` seeded
// synthetic token windows, each gathered once into its own buffers.
struct SeqBatches {
  models::SeqConfig c;
  models::TokenData data;
  std::vector<std::unique_ptr<models::SeqBatcher>> b;
  SeqBatches(const std::string& model, int n, int count) : c(models::SeqConfig::defaults(model)) {
    data = models::seq_data(c, "synthetic", std::size_t(n) * std::size_t(count), 5);
    std::vector<std::uint32_t> order(data.size());
    std::iota(order.begin(), order.end(), 0u);
    for (int k = 0; k < count; ++k) {
      b.push_back(std::make_unique<models::SeqBatcher>(c));
      b.back()->gather(data, order, std::size_t(k) * std::size_t(n), n);
    }
  }
};
// A fresh model of the zoo by name: an image model or a sequence model at its default sizes.
std::unique_ptr<models::Model> any_model(const std::string& name) {
  return models::is_seq_model(name) ? models::make_seq_model(models::SeqConfig::defaults(name)) : models::make_model(name);
}

// The point a case measures, whatever its dtype: op/device[/model/batch][/size].
std::string point_of(const json& r) {
  std::string p = r.value("op", "") + "/" + r.value("device", "");
  for (const char* k : {"model", "batch", "size"})
    if (r.contains(k)) p += "/" + (r.at(k).is_string() ? r.at(k).get<std::string>() : r.at(k).dump());
  return p;
}

// speedup_vs_fp32 = the fp32 case's median time / this entry's time at the same point, on each
// repetition and the median of the other dtypes: computed over the finished entries (Suite::derive).
void derive_speedups(std::vector<json>& entries) {
  auto ok = [](const json& e) { return !e.value("error_occurred", false) && e.value("real_time", 0.0) > 0; };
  std::map<std::string, double> fp32;
  for (const auto& e : entries)
    if (ok(e) && summary_entry(e) && e.value("dtype", "") == "fp32") fp32[point_of(e)] = e.at("real_time").get<double>();
  for (auto& e : entries) {
    if (!ok(e) || e.value("dtype", "") == "fp32" || !(summary_entry(e) || e.value("run_type", "") == "iteration")) continue;
    if (auto it = fp32.find(point_of(e)); it != fp32.end()) e["speedup_vs_fp32"] = it->second / e.at("real_time").get<double>();
  }
}

// How a train case is verified, from the same init on the same batches, the fp32 reference stepping
// beside the run under test, two ways:
//  lockstep (CPU): before each step the run under test takes the reference's weights and optimizer
//    state, so every step is judged on its own: its loss (the forward) within the dtype's tolerance,
//    max |loss - ref| / max |ref|, and its whole gradient (the backward) within grad_tol, as the
//    relative L2 error ||g - g_ref|| / ||g_ref|| (max over the steps);
//  trajectory: a second copy trains freely; the same loss measure over the steps, within traj_tol.
// Why both: a free run is chaotic. fp32 trained on its images rounded to bf16 (as autocast rounds a
// first conv's input) drifted 1.2-1.5e-2 from fp32 within 50 steps of the convnet (seeds 1 and 6 of
// the amp suite), beyond bf16's 1e-2, while the same steps in lockstep agree to 1e-5..1e-3. So the
// forward is held to the dtype's tolerance in lockstep, and the free run, which catches what adds up
// over steps (lost updates, a drifting master weight), to 5x it for the half types (the free runs of
// 8 seeds x 12 cases reached 2.0e-2). A bf16 gradient differs from fp32's by 1-9% per tensor over the
// steps here (net128 at batch 16 the most): grad_tol kHalfGradientL2Tolerance (0.25). Faults put into
// the AMP step were all caught by it, on all four models: gradients scaled by 1.3 (0.30), a last bias
// gradient lost (1.0), a first layer's negated (2.0); the loss-only check had passed the last two on
// some models.
// Per parameter tensor, summed over the steps (kernels/common/verify.h L2Error). Per tensor, so a
// small tensor's wrong gradient (a bias, a first layer) is not lost in a large one's; over the steps,
// so a step where a gradient nearly cancels to zero does not make a ratio of noise.
struct GradAgreement {
  std::vector<L2Error> err;
  std::vector<std::string> names;
  void add(const std::vector<models::Param*>& got, const std::vector<models::Param*>& ref) {
    if (err.empty()) {
      err.resize(ref.size());
      for (const auto* p : ref) names.push_back(p->name);
    }
    for (std::size_t i = 0; i < ref.size(); ++i) err[i].add(got[i]->grad.data(), ref[i]->grad.data(), ref[i]->size());
  }
  // The largest of the tensors' errors, and which tensor it is.
  double worst(std::string& name) const {
    double w = 0;
    for (std::size_t i = 0; i < err.size(); ++i)
      if (i == 0 || err[i].rel() > w) w = err[i].rel(), name = names[i];
    return w;
  }
};

struct LossParity {
  int steps = 0;
  GradAgreement grads;  // filled by the lockstep's steps
  double rel = 0, grad_rel = -1, traj_rel = 0, traj_tol = 0;  // grad_rel < 0: no lockstep
  std::vector<float> ref, traj;  // per-step losses: reference, free run
  // step(k) runs step k of the reference and of the free run: {reference loss, free run's loss};
  // lock(k), when given, then runs step k of the lockstep copy from the reference's weights before
  // step k, adds its gradient to `grads` and returns its loss.
  CheckResult check(int n, double tol, double grad_tol, double trajectory_tol, const std::string& what,
                    const std::function<std::pair<float, float>(int)>& step,
                    const std::function<float(int)>& lock = nullptr) {
    steps = n, rel = 0, grad_rel = lock ? 0 : -1, traj_rel = 0, traj_tol = trajectory_tol;
    ref.clear(), traj.clear(), grads = {};
    double worst = 0, worst_traj = 0, scale = 0;
    for (int k = 0; k < n; ++k) {
      const auto [lr, lt] = step(k);
      if (!std::isfinite(lt) || !std::isfinite(lr))
        return judge(std::numeric_limits<double>::infinity(), tol, "non-finite loss at step " + std::to_string(k));
      ref.push_back(lr), traj.push_back(lt);
      worst_traj = std::max(worst_traj, double(std::fabs(lt - lr)));
      scale = std::max(scale, double(std::fabs(lr)));
      if (lock) {
        const float ll = lock(k);
        if (!std::isfinite(ll))
          return judge(std::numeric_limits<double>::infinity(), tol, "non-finite loss in lockstep at step " + std::to_string(k));
        worst = std::max(worst, double(std::fabs(ll - lr)));
      }
    }
    scale = std::max(scale, 1e-30);
    traj_rel = worst_traj / scale;
    rel = lock ? worst / scale : traj_rel;
    if (lock) {
      std::string which;
      grad_rel = grads.worst(which);
      if (!(grad_rel <= grad_tol))
        return judge(grad_rel, grad_tol, "gradient of " + which + " in lockstep (relative L2 error over " + std::to_string(n) + " steps)");
      if (rel > tol) return judge(rel, tol, what + " in lockstep");
    }
    if (traj_rel > traj_tol) return judge(traj_rel, traj_tol, what + " trained freely");
    return judge(rel, tol, what);
  }
  void annotate(json& e) const {
    e["parity_steps"] = steps;
    e["parity_max_rel_diff"] = rel;
    if (grad_rel >= 0) e["parity_grad_rel_err"] = grad_rel;
    e["trajectory_max_rel_diff"] = traj_rel;
    e["trajectory_tolerance"] = traj_tol;
    if (!ref.empty()) {
      e["loss_first_fp32"] = ref.front(), e["loss_last_fp32"] = ref.back();
      e["loss_last"] = traj.back();
    }
  }
};

// The free run's tolerance: fp32 the dtype's own (the same arithmetic), the half types 5x (LossParity).
double trajectory_tolerance(DType d, double tol) { return d == DType::fp32 ? tol : 5 * tol; }

// ---- op "train" (CPU) ----
class TrainAmpCase final : public Case {
 public:
  TrainAmpCase(std::string model, int batch, DType dtype, int parity_steps)
      : model_(std::move(model)), batch_(batch), dtype_(dtype), steps_(parity_steps) {}

  void setup() override {
    m_ = any_model(model_);
    nbatches_ = std::max(steps_, 4);
    if (seq()) {
      tokens_ = std::make_unique<SeqBatches>(model_, batch_, nbatches_);
    } else {
      const models::Shape in = m_->input_shape(1);
      data_ = amp_data(std::size_t(batch_) * nbatches_, in.c(), in.h(), in.w());
    }
    m_->init(1);
    opt_ = std::make_unique<models::Optimizer>(models::default_optimizer(model_), m_->params());
    if (dtype_ != DType::fp32) tr_ = std::make_unique<models::AmpTrainer>(*m_, *opt_, dtype_);  // fp32: run()
  }

  bool seq() const { return models::is_seq_model(model_); }
  // Batch k, and the dropout masks of step k for a model that has them (the same in every copy).
  models::Batch batch(int k, models::Model& m) const {
    m.set_step(true, std::uint64_t(k));
    if (tokens_) return tokens_->b[std::size_t(k % nbatches_)]->batch();
    const std::size_t per = data_->images.size() / data_->labels.size();
    const std::size_t first = std::size_t(k % nbatches_) * batch_;
    models::Batch b;
    b.x = data_->images.data() + first * per;
    b.labels = data_->labels.data() + first;
    b.n = batch_;
    return b;
  }

  CheckResult verify() override {
    // Three fresh copies from the same init: the fp32 reference (the model's own train_step), ours
    // trained freely, and ours in lockstep (the reference's weights and optimizer state before each step).
    auto ref = any_model(model_);
    auto amp = any_model(model_);
    auto lck = any_model(model_);
    ref->init(1), amp->init(1), lck->init(1);
    const auto cfg = models::default_optimizer(model_);
    models::Optimizer oref(cfg, ref->params()), oamp(cfg, amp->params()), olck(cfg, lck->params());
    models::AmpTrainer t(*amp, oamp, dtype_), tl(*lck, olck, dtype_);
    const std::vector<models::Param*> pref = ref->params(), plck = lck->params();
    std::vector<std::vector<float>> before(pref.size());
    // fp32: our layer loop must reproduce the model's own step; half types: the dtype's tolerances.
    const double tol = default_tolerance(dtype_);
    return parity_.check(
        steps_, tol, dtype_ == DType::fp32 ? tol : kHalfGradientL2Tolerance, trajectory_tolerance(dtype_, tol),
        "loss over " + std::to_string(steps_) + " steps vs fp32",
        [&](int k) {
          for (std::size_t i = 0; i < pref.size(); ++i) before[i] = pref[i]->value;
          olck.copy_state_from(oref);  // the state the reference steps from
          const float lr = models::train_step(*ref, oref, batch(k, *ref));
          return std::make_pair(lr, t.step(batch(k, *amp)));
        },
        [&](int k) {
          for (std::size_t i = 0; i < plck.size(); ++i) plck[i]->value = before[i];
          const float l = tl.step(batch(k, *lck));
          if (!tl.last_step_skipped()) parity_.grads.add(plck, pref);  // fp16: a skipped step has no gradient
          return l;
        });
  }

  // fp32 is timed as the model's own training step (models::train_step: what training without
  // autocast runs, with the fused first layer and the backward over the pools' winners), the
  // baseline a user compares mixed precision with; verify() holds our layer-by-layer fp32 loop to it.
  // The half types are timed as the AmpTrainer step.
  double run() override {
    const models::Batch b = batch(int(k_++ % nbatches_), *m_);
    if (dtype_ == DType::fp32) models::train_step(*m_, *opt_, b);
    else tr_->step(b);
    return 0;
  }
  // --profile: one more step on the next batch, region by region (the timed step's layers, loss,
  // zero_grad, optimizer), its loss and gradients checked against an unprofiled step's.
  bool profile(ProfileResult& out) override {
    const models::Batch b = batch(int(k_++ % nbatches_), *m_);
    auto gradients = [&](models::Profiler* prof) -> double {
      // bf16: no loss scaling, so AmpTrainer::step() is its gradients() + the optimizer
      return tr_ ? tr_->gradients(b, prof) : models::gradients(*m_, b, prof);
    };
    return profile_cpu_step(*m_, gradients, [&] { opt_->step(); }, out);
  }
  Work work() const override {
    return {m_->train_flops(batch_), 0, double(batch_) * (tokens_ ? tokens_->c.tokens_per_sample() : 1)};
  }
  Metric metric() const override { return tokens_ ? Metric::tokens_per_s : Metric::imgs_per_s; }
  void annotate(json& e) const override {
    parity_.annotate(e);
    e["params"] = m_->num_params();
    napkin::put(e, napkin::train_step(*m_, batch_));  // fp32 bytes: an upper bound under autocast
    e["timed_step"] = dtype_ == DType::fp32 ? "model train_step (no autocast)" : "AmpTrainer (autocast, layer by layer)";
    if (dtype_ == DType::bf16) {
      // native: Conv2d/Linear on bf16 operands (oneDNN, vdpbf16ps); emulated: fp32 arithmetic on
      // bf16-rounded values, which is not bf16 speed (models/amp.h)
      const bool native = models::bf16_compute_native();
      e["bf16_compute"] = native ? "native" : "emulated";
      e["bf16_path"] = native ? "oneDNN bf16 conv/matmul (" + cpu::onednn::isa() + "), fp32 accumulation"
                              : "bf16-rounded operands and outputs, fp32 kernels (" + cpu::bf16_gemm_path() + ")";
    }
  }
  void teardown() override { tr_.reset(), opt_.reset(), m_.reset(), data_.reset(), tokens_.reset(); }

 private:
  std::string model_;
  int batch_;
  DType dtype_;
  int steps_, nbatches_ = 1;
  long k_ = 0;
  LossParity parity_;
  std::shared_ptr<const AmpData> data_;
  std::unique_ptr<SeqBatches> tokens_;  // a sequence model's batches (data_: an image model's)
  std::unique_ptr<models::Model> m_;
  std::unique_ptr<models::Optimizer> opt_;
  std::unique_ptr<models::AmpTrainer> tr_;
};

// ---- op "train" (GPU) ----
class TrainAmpGpuCase final : public Case {
 public:
  TrainAmpGpuCase(std::string device, std::string model, int batch, DType dtype, int parity_steps)
      : dev_(std::move(device)), model_(std::move(model)), batch_(batch), dtype_(dtype), steps_(parity_steps) {}

  void setup() override {
    m_ = any_model(model_);
    nbatches_ = std::max(steps_, seq() ? 4 : 16);  // the timed epoch: nbatches_ steps (a sequence model: one)
    if (seq()) {
      tokens_ = std::make_unique<SeqBatches>(model_, batch_, nbatches_);
    } else {
      const models::Shape in = m_->input_shape(1);
      data_ = amp_data(std::size_t(batch_) * nbatches_, in.c(), in.h(), in.w());
      epoch_ = dataset(0, nbatches_);
    }
    m_->init(1);
    // Timed: device-resident batches, so the epoch measures the steps, not the input pipeline (a
    // sequence model: token batches copied in per step, a few KB).
    tr_ = models::make_trainer(*m_, models::default_optimizer(model_), options(models::InputMode::resident));
    if (!seq()) tr_->prepare(epoch_, batch_);  // the upload and cuDNN's searches, untimed
  }
  bool seq() const { return models::is_seq_model(model_); }

  CheckResult verify() override {
    // The CPU's fp32 train_step (the reference) and a second GPU trainer in this dtype, from the same
    // init, step by step on the same batches (a one-batch epoch per step).
    auto ref = any_model(model_);
    auto gm = any_model(model_);
    ref->init(1), gm->init(1);
    models::Optimizer oref(models::default_optimizer(model_), ref->params());
    auto g = models::make_trainer(*gm, models::default_optimizer(model_), options(models::InputMode::pageable));
    // The trajectory alone (no lockstep: the GPU trainer keeps its weights on the device).
    return parity_.check(steps_, tol(), 0, trajectory_tolerance(dtype_, tol()),
                         "GPU " + std::string(dtype_name(dtype_)) + " loss over " + std::to_string(steps_) +
                             " steps vs the CPU's fp32",
                         [&](int k) {
                           if (seq()) {  // step k's batch and dropout masks (the GPU trainer sets its own: k)
                             ref->set_step(true, std::uint64_t(k));
                             const models::Batch b = tokens_->b[std::size_t(k % nbatches_)]->batch();
                             const float lr = models::train_step(*ref, oref, b);
                             return std::make_pair(lr, g->train_batch(b));
                           }
                           const models::Dataset one = dataset(k % nbatches_, 1);
                           const models::Batch b{one.images.data(), one.labels.data(), nullptr, batch_};
                           const float lr = models::train_step(*ref, oref, b);
                           return std::make_pair(lr, static_cast<float>(g->train_epoch(one, batch_)));
                         });
  }

  bool profile(ProfileResult& out) override {
    if (seq()) return false;  // (the sequence trainer has no per-layer profile)
    return profile_trainer_step(*tr_, *m_, epoch_, batch_, dev_,
                                "profile amp " + model_ + " " + dev_ + " " + dtype_name(dtype_) + " batch " +
                                    std::to_string(batch_),
                                out);
  }

  double run() override {
    if (seq()) tr_->train_batch(tokens_->b[std::size_t(k_++ % nbatches_)]->batch());  // waits for the device
    else tr_->train_epoch(epoch_, batch_);  // returns after the device finished
    return 0;
  }
  Work work() const override {
    if (seq()) return {m_->train_flops(batch_), 0, double(batch_) * tokens_->c.tokens_per_sample()};
    return {m_->train_flops(batch_) * nbatches_, 0, double(batch_) * nbatches_};
  }
  Metric metric() const override { return seq() ? Metric::tokens_per_s : Metric::imgs_per_s; }
  void annotate(json& e) const override {
    parity_.annotate(e);
    e["steps_per_iteration"] = seq() ? 1 : nbatches_;
    if (seq() && dtype_ != DType::fp32) {  // models/cuda/gpu_seq_trainer.cu: the GEMMs alone
      e["autocast"] = "gemm operands";
#ifdef DLB_HAVE_CUDA
      e["cublas_compute"] = cuda::gemm_f32_compute_name(dtype_);
#endif
    }
    e["params"] = m_->num_params();
    napkin::put(e, napkin::train_step(*m_, batch_), seq() ? 1 : nbatches_);  // fp32 bytes: an upper bound under autocast
    e["trainer"] = tr_->describe();
    e["peak_device_bytes"] = tr_->peak_device_bytes();
    if (dtype_ == DType::fp16) e["loss_scale"] = tr_->loss_scale();
  }
  void teardown() override { tr_.reset(), m_.reset(), data_.reset(), tokens_.reset(), epoch_ = {}; }

 private:
  std::string dev_, model_;
  int batch_;
  DType dtype_;
  int steps_, nbatches_ = 1;
  long k_ = 0;
  LossParity parity_;
  std::shared_ptr<const AmpData> data_;
  std::unique_ptr<SeqBatches> tokens_;  // a sequence model's batches (data_: an image model's)
  models::Dataset epoch_;
  std::unique_ptr<models::Model> m_;
  std::unique_ptr<models::Trainer> tr_;

  models::TrainOptions options(models::InputMode in) const {
    models::TrainOptions o;
    o.device = dev_, o.input = in, o.dtype = dtype_;
    return o;
  }
  // Batches [first, first + count) of the synthetic data as a Dataset.
  models::Dataset dataset(int first, int count) const {
    const std::size_t per = std::size_t(data_->c) * data_->h * data_->w;
    const std::size_t a = std::size_t(first) * batch_, b = a + std::size_t(count) * batch_;
    models::Dataset d;
    d.name = "amp-synthetic", d.c = data_->c, d.h = data_->h, d.w = data_->w, d.classes = 10;
    d.images.assign(data_->images.begin() + a * per, data_->images.begin() + b * per);
    d.labels.assign(data_->labels.begin() + a, data_->labels.begin() + b);
    return d;
  }
  // Two fp32 implementations differ by summation order (~1e-6 per step, compounding over the
  // steps): 1e-4. tf32 and the half types: their roundings on every layer, 1e-2. A sequence model
  // (its GEMMs' operands alone rounded): the larger of that and the step's loss tolerance
  // (kernels/common/autocast_tolerance.h: bf16 3.1e-2, fp16 2.0e-3). fp16's overflow is not an
  // error there but a skipped step (the GPU's weights stay while the CPU's move): at the scaler's
  // 2^16 the seed models' scaled gradients stay far below 65504, and `loss_scale` below 2^16 in a
  // record says steps were skipped (halved once per skip; growth needs 2000 finite steps).
  double tol() const {
    if (dtype_ == DType::fp32) return 1e-4;
    const double t = std::max(1e-2, default_tolerance(dtype_));
    return seq() ? std::max(t, autocast_step_tolerance(dtype_).loss) : t;
  }
};

// ---- op "gemm" (CPU): fp32 sgemm vs bf16 storage with fp32 accumulation ----
class GemmAmpCpu final : public Case {
 public:
  GemmAmpCpu(long n, DType t) : n_(n), t_(t) {}
  void setup() override {
    const std::size_t nn = std::size_t(n_) * n_;
    try {
      a_.resize(nn), b_.resize(nn), c_.resize(nn);
      if (t_ == DType::bf16) ah_.resize(nn), bh_.resize(nn);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("gemm " + std::to_string(n_));
    }
    fill_uniform(a_.data(), nn, 11), fill_uniform(b_.data(), nn, 12);
    if (t_ == DType::bf16) {
      cpu::cast_fp32_to_bf16(a_.data(), ah_.data(), nn), cpu::cast_fp32_to_bf16(b_.data(), bh_.data(), nn);
      cpu::cast_bf16_to_fp32(ah_.data(), a_.data(), nn), cpu::cast_bf16_to_fp32(bh_.data(), b_.data(), nn);
    }
  }
  CheckResult verify() override {
    run();
    return cpu::check_gemm(a_.data(), b_.data(), c_.data(), n_, n_, n_, t_);  // a_, b_: the rounded inputs
  }
  double run() override {
    if (t_ == DType::fp32) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_, n_, n_, 1.0f, a_.data(), n_, b_.data(), n_, 0.0f,
                  c_.data(), n_);
    } else {
      cpu::Bf16GemmArgs g;
      g.m = g.n = g.k = n_, g.a = ah_.data(), g.b = bh_.data(), g.c = c_.data();
      cpu::bf16_gemm(g);
    }
    return 0;
  }
  Work work() const override { return {2.0 * n_ * n_ * n_, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& e) const override {
    e["impl"] = t_ == DType::fp32 ? "openblas-sgemm" : cpu::bf16_gemm_path();
    if (t_ == DType::bf16) e["bf16_compute"] = cpu::bf16_gemm_native() ? "native" : "emulated";
  }
  void teardown() override { a_ = {}, b_ = {}, c_ = {}, ah_ = {}, bh_ = {}; }

 private:
  long n_;
  DType t_;
  std::vector<float> a_, b_, c_;
  std::vector<std::uint16_t> ah_, bh_;
};


std::string fmt(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void summarize_amp(const std::vector<json>& records, std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : records) {
    const bool err = r.value("error_occurred", false);
    const double t = r.value("real_time", 0.0);
    std::string what = r.value("op", "") == "train" ? r.value("model", "") + " b=" + std::to_string(r.value("batch", 0))
                                                    : r.value("op", "") + " n=" + std::to_string(r.value("size", 0LL));
    std::string thr = "-", speed = "-", parity = "-";
    if (!err) {
      if (r.contains("imgs_per_s")) thr = fmt(r.at("imgs_per_s").get<double>(), "%.0f imgs/s");
      else if (r.contains("tokens_per_s")) thr = fmt(r.at("tokens_per_s").get<double>(), "%.0f tokens/s");
      else if (r.contains("gflops")) thr = fmt(r.at("gflops").get<double>(), "%.1f GFLOP/s");
      else if (r.contains("gb_per_s")) thr = fmt(r.at("gb_per_s").get<double>(), "%.1f GB/s");
      if (r.contains("speedup_vs_fp32")) speed = fmt(r.at("speedup_vs_fp32").get<double>(), "%.2fx");
      else if (r.value("dtype", "") == "fp32") speed = "1.00x";
    }
    if (r.contains("parity_grad_rel_err"))
      parity = fmt(r.at("parity_max_rel_diff").get<double>(), "%.1e") + ", grad " +
               fmt(r.at("parity_grad_rel_err").get<double>(), "%.1e") + ", free " +
               fmt(r.value("trajectory_max_rel_diff", 0.0), "%.1e") + " / " + std::to_string(r.value("parity_steps", 0)) + " steps";
    else if (r.contains("parity_max_rel_diff"))
      parity = "free " + fmt(r.at("parity_max_rel_diff").get<double>(), "%.1e") + " / " + std::to_string(r.value("parity_steps", 0)) + " steps";
    else if (r.contains("max_rel_err"))
      parity = fmt(r.at("max_rel_err").get<double>(), "%.1e");
    const std::string status = r.contains("skipped") ? "skipped" : err ? "FAILED" : "yes";
    rows.push_back({what, r.value("device", ""), r.value("dtype", ""), err ? "-" : fmt(t / 1000.0 / r.value("steps_per_iteration", 1), "%.3f ms"), thr, speed,
                    parity, status});
  }
  const std::vector<std::string> head = {"Case", "Device", "dtype", "Step time", "Throughput", "vs fp32",
                                         "Parity (max rel diff)", "Verified"};
  out << "\nMixed precision vs fp32 (speedup = fp32 step time / this step time; parity = max |loss - fp32 loss| / max |fp32 loss| "
         "with each step from fp32's weights (lockstep), the gradient's relative L2 error there, and the same loss measure "
         "trained freely)\n\n";
  rows.insert(rows.begin(), head);
  print_markdown(out, rows);
  out << "\nCPU bf16 path: " << cpu::bf16_gemm_path() << "; casts: bf16 " << cpu::bf16_cast_path() << ", fp16 "
      << cpu::fp16_cast_path() << "\n";
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<DType> dtypes;
  for (const auto& d : axis_strings(o, "dtype")) dtypes.push_back(parse_dtype(d));
  models::check_dtypes_for_run(dtypes, std::any_of(o.devices.begin(), o.devices.end(), is_gpu));
  const auto model_names = axis_strings(o, "model");
  const auto batches = axis_ints(o, "batch");
  const auto sizes = axis_ints(o, "size");
  const int steps = static_cast<int>(axis_ints(o, "parity_steps").front());
  for (const auto& m : model_names)
    if (!models::is_seq_model(m)) models::make_model(m);  // UsageError for an unknown model
  for (long long b : batches)
    if (b <= 0 || b > 65536) throw UsageError("--batch " + std::to_string(b) + ": expected 1..65536");
  // fp32 first at every point: the baseline of the others' speedup_vs_fp32
  std::stable_partition(dtypes.begin(), dtypes.end(), [](DType t) { return t == DType::fp32; });
  std::vector<CaseSpec> cases;
  for (const auto& dev : o.devices) {
    const bool gpu = is_gpu(dev);
    if (gpu)
      for (const auto& m : model_names)
        for (long long b : batches)
          for (DType t : dtypes) {
            CaseId id{"amp", "train", dev, dtype_name(t), {}};
            id.with("model", m).with("batch", b);
            cases.push_back({id, [dev, m, b, t, steps] { return std::make_unique<TrainAmpGpuCase>(dev, m, int(b), t, steps); }});
          }
    if (!gpu) {
      for (const auto& m : model_names)
        for (long long b : batches)
          for (DType t : dtypes) {
            if (!models::dtype_supported(t, false)) continue;
            CaseId id{"amp", "train", dev, dtype_name(t), {}};
            id.with("model", m).with("batch", b);
            cases.push_back({id, [m, b, t, steps] { return std::make_unique<TrainAmpCase>(m, int(b), t, steps); }});
          }
    }
    for (long long n : sizes)
      for (DType t : dtypes) {
        if (!models::dtype_supported(t, gpu)) continue;
        CaseId id{"amp", "gemm", dev, dtype_name(t), {}};
        id.with("size", n);
        if (!gpu) {
          cases.push_back({id, [n, t] { return std::make_unique<GemmAmpCpu>(n, t); }});
        } else {
#ifdef DLB_HAVE_CUDA
          const int idx = gpu_index(dev);
          cases.push_back({id, [idx, n, t] { return make_gemm_amp_gpu(idx, n, t); }});
#endif
        }
      }
#ifdef DLB_HAVE_CUDA
    if (gpu)
      for (DType t : dtypes) {
        if (!models::is_half(t)) continue;
        const int idx = gpu_index(dev);
        const std::size_t n = o.quick ? (std::size_t(1) << 22) : (std::size_t(1) << 26);
        CaseId id{"amp", "cast", dev, dtype_name(t), {}};
        id.with("size", static_cast<long long>(n));
        cases.push_back({id, [idx, n, t] { return make_amp_kernel_gpu(idx, "cast", t, n); }});
        if (t == DType::fp16) {  // the loss scaler's pass (fp16 only: bf16 needs no scaling)
          CaseId u{"amp", "unscale", dev, dtype_name(t), {}};
          u.with("size", static_cast<long long>(n));
          cases.push_back({u, [idx, n, t] { return make_amp_kernel_gpu(idx, "unscale", t, n); }});
        }
      }
#endif
  }
  return cases;
}

}  // namespace

DLB_SUITE(amp)
    .about("Mixed precision (fp32 vs bf16 on the CPU; fp32/tf32/fp16/bf16 training steps and GEMMs on GPUs): step time, "
           "imgs/s, speedup, loss parity")
    .axis("model", {"mlp", "net128", "convnet", "autoencoder"}, {"mlp", "net128"})  // --model rnn,lstm,transformer too
    .axis("batch", {16, 64, 256}, {64})
    .axis("size", {512, 1024, 2048}, {512})  // op gemm: n x n x n
    .axis("dtype", {"fp32", "bf16", "fp16", "tf32"})
    .axis("parity_steps", {50}, {8})  // steps each train case is checked over against fp32
    .takes({flag::batch(), flag::sizes(), flag::dtype(), flag::profile(),
            FlagSpec{"--model", "models (mlp, net128, convnet, autoencoder; rnn, lstm, transformer at their default sizes)",
                     "model", true, FlagSpec::Parse::words, 0,
                     {"mlp", "net128", "convnet", "autoencoder", "rnn", "lstm", "transformer"}}})
    .cases(expand)
    .derived(derive_speedups)
    .summary(summarize_amp);

}  // namespace dlb::bench
