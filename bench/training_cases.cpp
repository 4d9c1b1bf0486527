// TrainingCase and PeerCase, the cases of suites lecture and train (see training_cases.h).
#include "bench/training_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "bench/napkin.h"
#include "bench/peer.h"
#include "models/trainer.h"
#include "kernels/common/verify.h"

namespace dlb::bench {

using models::Dataset;

// Seeded synthetic data, shaped for the model: CIFAR-shaped 3x32x32, or 1- / 3-channel 28x28 crops
// of it for the MNIST-shaped models. Cached so the cases of one run share it.
std::shared_ptr<const Dataset> training_data(std::size_t images, int c, int h, int w) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const Dataset>> cache;
  const std::string key = std::to_string(images) + "/" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
  std::lock_guard<std::mutex> lock(mu);
  if (auto p = cache[key].lock()) return p;
  models::Split s;
  try {
    s = models::synthetic_cifar10(images, 0, 0);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(std::to_string(images) + " synthetic images");
  }
  auto d = std::make_shared<Dataset>();
  Dataset& src = s.train;
  if (c == src.c && h == src.h && w == src.w) {
    *d = std::move(src);
  } else {
    // Centre crop, channels averaged when one is wanted.
    d->name = src.name + "-" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
    d->c = c, d->h = h, d->w = w, d->classes = src.classes, d->labels = src.labels;
    d->images.resize(src.size() * c * h * w);
    const int oy = (src.h - h) / 2, ox = (src.w - w) / 2;
    for (std::size_t i = 0; i < src.size(); ++i)
      for (int ch = 0; ch < c; ++ch)
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x) {
            double v = 0;
            if (c == src.c) {
              v = src.images[((i * src.c + ch) * src.h + y + oy) * src.w + x + ox];
            } else {
              for (int sc = 0; sc < src.c; ++sc) v += src.images[((i * src.c + sc) * src.h + y + oy) * src.w + x + ox];
              v /= src.c;
            }
            d->images[((i * c + ch) * h + y) * w + x] = static_cast<float>(v);
          }
  }
  cache[key] = d;
  return d;
}

std::string device_label(const std::string& dev) { return dev == "cpu" ? "CPU" : "GPU"; }

namespace {

double mb(std::size_t bytes) { return bytes / 1e6; }

class TrainingCase final : public Case {
 public:
  TrainingCase(std::string model, std::string device, int batch, std::size_t images, models::InputMode input,
               bool graph, bool lecture, bool quick, DType dtype)
      : model_name_(std::move(model)), device_(std::move(device)), batch_(batch), images_(images), input_(input),
        graph_(graph), lecture_(lecture), quick_(quick), dtype_(dtype) {}

  void fed_by(std::shared_ptr<const Feed> f) { feed_ = std::move(f); }

  void setup() override {
    if (batch_ <= 0) throw UsageError("batch must be positive");
    if (device_ == "cpu" && dtype_ != DType::fp32)
      throw Unsupported(std::string("the CPU trainer runs fp32; CPU ") + dtype_name(dtype_) +
                        " autocast is measured by suite amp");
    model_ = models::make_model(model_name_);
    const models::Shape in = model_->input_shape(1);
    if (feed_) {
      lo_ = with_dataset(feed_->o, images_);
      lo_.batch = batch_;
      src_ = open_dataset(lo_);
      if (src_->channels() != in.c() || src_->height() != in.h() || src_->width() != in.w())
        throw Unsupported("the loader gives " + std::to_string(src_->channels()) + "x" + std::to_string(src_->height()) + "x" +
                          std::to_string(src_->width()) + " images; model " + model_name_ + " expects " + in.str().substr(2));
      images_ = src_->size();  // the epoch is the dataset's (at most --images samples)
    }
    data_ = training_data(images_, in.c(), in.h(), in.w());
    model_->init(0);
    models::TrainOptions o;
    o.device = device_, o.input = input_, o.cuda_graph = graph_, o.dtype = dtype_;
    trainer_ = models::make_trainer(*model_, models::default_optimizer(model_name_), o);
    // One-time work of the first epoch (resident upload, cuDNN searches for both batch shapes) here,
    // untimed: a timed epoch is one iteration with no warm-up.
    trainer_->prepare(*data_, batch_);
    if (lecture_) {
      std::cout << "batchsize=" << batch_ << ", model_hidden_num_chans=128, images=" << images_ << ", device=" << device_
                << (dtype_ == DType::fp32 ? "" : std::string(", dtype=") + dtype_name(dtype_)) << "\n";
      if (device_ != "cpu") {
        char buf[128];
        std::snprintf(buf, sizeof buf, "(post net.to) GPU max_memory_allocated: %g MB\n", mb(trainer_->model_device_bytes()));
        std::cout << buf;
      }
    }
  }

  CheckResult verify() override {
    // One batch: the case's own size (gradients of a step), first images of the dataset.
    int n = static_cast<int>(std::min<std::size_t>(batch_, data_->size()));
    const std::size_t item = data_->images.size() / data_->size();
    const float* x = data_->images.data();
    const std::int32_t* y = data_->labels.data();
    // Fed: the loader's first batch, checked bit for bit against the reference transform, is the step's.
    std::unique_ptr<ld::Loader> loader;
    ld::BatchLease lease;
    if (feed_) {
      loader = std::make_unique<ld::Loader>(src_, lo_);
      lease = loader->next();
      if (!lease) return judge(1.0, 0.5, "the loader gave no batch");
      EpochCheck check(*src_, lo_, EpochCheck::first);
      try {
        check.batch(*lease);
      } catch (const std::runtime_error& e) {
        return judge(1.0, 0.5, e.what());
      }
      x = lease->x, y = lease->labels, n = lease->n;
    }
    models::Batch b{x, y, nullptr, n};
    WorstError worst;
    double grad_l2 = 0;
    std::string grad_tensor;
    if (device_ == "cpu") {
      const float loss = trainer_->gradients(b);
      model_->sync_ref();
      std::vector<double> x64(x, x + n * item);
      const double ref_loss = model_->forward_backward_ref(x64.data(), b);
      worst.loss(loss, ref_loss);
      for (auto* p : model_->params()) worst.add(max_rel_err(p->grad.data(), p->ref_grad.data(), p->size()), p->name + "'s gradient");
    } else {
      // The CPU fast path from the same weights is the reference of the GPU step.
      auto cpu = models::make_model(model_name_);
      cpu->copy_params_from(*model_);
      cpu->zero_grad();
      const float ref_loss = cpu->forward_backward(b);
      const float loss = trainer_->gradients(b);
      worst.loss(loss, ref_loss);
      auto a = model_->params(), r = cpu->params();
      if (dtype_ == DType::fp32)
        for (std::size_t i = 0; i < a.size(); ++i)
          worst.add(max_rel_err(a[i]->grad.data(), r[i]->grad.data(), a[i]->size()), a[i]->name + "'s gradient");
      grad_l2 = model_->gradient_l2_error(*cpu, grad_tensor);
    }
    // Autocast (GPU tf32/fp16/bf16): a weight gradient is a half-type sum whose terms largely cancel,
    // so its largest elements are off by up to ~0.4 of the tensor's largest while the tensor is right:
    // each tensor within kHalfGradientL2Tolerance in L2 (as the amp suite; the CPU's own autocast step
    // of net128 in bf16 reaches 0.13 there and 0.37 element-wise), the loss within 4x the tolerance.
    if (device_ != "cpu" && dtype_ != DType::fp32 && !(grad_l2 <= kHalfGradientL2Tolerance))
      return judge(grad_l2, kHalfGradientL2Tolerance,
                   std::string("gradient of ") + grad_tensor + " (relative L2, " + dtype_name(dtype_) + " vs the CPU's fp32)");
    // Gradients pass through up to 6 layers of sums: a few 1e-6 relative is the norm in fp32; under
    // autocast every layer adds its dtype's rounding (tf32 ~1e-3, bf16 ~4e-3 per value), hence the
    // same 4x margin on the dtype's tolerance. fp16 gradients are unscaled before they come back.
    // A GPU in fp32: cuDNN's algorithm search may keep an FFT or Winograd convolution, whose
    // transforms round differently (up to ~1e-4 of the gradient's scale); 2e-4 admits that and
    // still catches TF32 math used by mistake (~1e-3).
    const double tol = device_ != "cpu" && dtype_ == DType::fp32 ? 2e-4 : 4 * default_tolerance(dtype_);
    return judge(worst.err, tol,
                 std::string("loss and gradients of one step (") + dtype_name(dtype_) +
                     (device_ == "cpu" ? " vs the fp64 reference)" : " vs the CPU's fp32)") + worst.said());
  }

  bool profile(ProfileResult& out) override {
    return profile_trainer_step(*trainer_, *model_, *data_, batch_, device_,
                                "profile " + model_name_ + " " + device_ + " batch " + std::to_string(batch_), out);
  }

  double run() override {
    if (lecture_)
      std::cout << "(" << device_label(device_) << ") Begin training (" << model_->num_params() << " model params)\n"
                << std::flush;
    const auto t0 = std::chrono::steady_clock::now();
    if (feed_) {  // a fresh loader per epoch (its workers started), as PyTorch's iterator
      ld::Loader loader(src_, lo_);
      last_loss_ = trainer_->train_epoch(loader);
      const ld::LoaderStats st = loader.stats();
      wait_s_ += st.wait_s, first_.push_back(st.first_batch_s), ++epochs_;
      loader_runs_ = loader.describe();
    } else {
      last_loss_ = trainer_->train_epoch(*data_, batch_);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (lecture_) {
      char buf[160];
      if (device_ != "cpu") {
        std::snprintf(buf, sizeof buf, "(post train_model) GPU max_memory_allocated: %g MB\n", mb(trainer_->peak_device_bytes()));
        std::cout << buf;
      }
      std::snprintf(buf, sizeof buf, "(%s) Finished Training (%g secs, %g imgs/sec, mean loss %.4f)\n",
                    device_label(device_).c_str(), s, images_ / s, last_loss_);
      std::cout << buf << std::flush;
    }
    return s;
  }
  long iterations() const override { return 1; }
  int repetitions() const override { return quick_ ? 2 : 1; }
  // flops stay out of Work so the tables show imgs/s; train_gflops is annotated instead.
  Work work() const override { return {0, 0, double(images_)}; }
  Metric metric() const override { return Metric::imgs_per_s; }
  void annotate(json& r) const override {
    r["model_params"] = model_->num_params();
    // Napkin math: forward + backward-data + backward-filter of every conv/linear = 3x forward
    // (2x for the first layer) -> 2 * 61 MFLOP per image for Net(128) on 32x32.
    const double flops = model_->train_flops(1) * double(images_);
    // Roofline keys for one epoch: full steps plus the partial last one (bench/napkin.h).
    const std::size_t full = images_ / std::size_t(batch_), last = images_ % std::size_t(batch_);
    napkin::Cost epoch = napkin::train_step(*model_, batch_);
    epoch.flops *= double(full), epoch.bytes *= double(full);
    if (last) {
      const auto tail = napkin::train_step(*model_, int(last));
      epoch.flops += tail.flops, epoch.bytes += tail.bytes;
    }
    napkin::put(r, epoch);
    const double t = r.value("real_time", 0.0) * 1e-6;
    if (t > 0) r["train_gflops"] = flops / t * 1e-9;
    r["mean_loss"] = last_loss_;
    r["loss_read"] = "epoch";  // train_epoch sums the loss on the device, reads it once (the peer does the same)
    r["trainer"] = trainer_->describe();
    r["fed_by"] = feed_ ? feed_->by : "resident";
    if (feed_ && epochs_) {
      r["loader"] = ld::describe_options(lo_);
      r["loader_runs"] = loader_runs_;
      r["dataset"] = src_->path();
      // The training loop's time blocked in next(): what the pipeline did not hide.
      r["loader_wait_s_per_epoch"] = wait_s_ / epochs_;
      std::vector<double> f = first_;
      std::sort(f.begin(), f.end());
      r["first_batch_ms"] = 1e3 * f[f.size() / 2];
    }
    if (dtype_ == DType::fp16) r["loss_scale"] = trainer_->loss_scale();
    if (device_ != "cpu") {
      r["model_device_bytes"] = trainer_->model_device_bytes();
      r["peak_device_bytes"] = trainer_->peak_device_bytes();
    }
  }
  void teardown() override {
    trainer_.reset();
    model_.reset();
    data_.reset();
  }

 private:
  std::string model_name_, device_;
  int batch_;
  std::size_t images_;
  models::InputMode input_;
  bool graph_, lecture_, quick_;
  DType dtype_;
  std::unique_ptr<models::Model> model_;
  std::shared_ptr<const Dataset> data_;
  std::unique_ptr<models::Trainer> trainer_;
  double last_loss_ = 0;
  std::shared_ptr<const Feed> feed_;  // null: resident tensors
  ld::LoaderOptions lo_;
  std::shared_ptr<const ld::Source> src_;
  std::string loader_runs_;
  double wait_s_ = 0;
  std::vector<double> first_;
  int epochs_ = 0;
};

// A peer (bench/peers/pytorch_lecture.py, pytorch_gpt2.py, llmc_gpt2.py; --serve): one child per case,
// started and warmed up in setup(), then one repetition (an epoch, N steps) per request line, so the harness times its epochs in the
// same interleaved rounds as ours (run() returns the epoch's own time: manual time). Verification:
// the peer ran an epoch and its loss is finite (or PeerSpec::check); its numbers are its own.
class PeerCase final : public Case {
 public:
  PeerCase(PeerSpec spec, int reps) : spec_(std::move(spec)), reps_(reps) {}
  void setup() override {
    if (spec_.prepare) spec_.prepare(spec_);
    std::vector<std::string> args = spec_.args;
    args.push_back("--serve");
    peer_ = std::make_unique<PeerChild>(spec_.script, args, spec_.runner);
  }
  CheckResult verify() override {
    run();  // one untimed repetition: the peer runs and its loss is finite (or its output checks)
    if (spec_.check) return spec_.check();
    return judge(std::isfinite(loss_) ? 0.0 : 1.0, 0.5, "peer loss not finite");
  }
  double run() override {
    const json r = peer_->request(spec_.request, "seconds");
    loss_ = r.value("loss", loss_);
    loss_read_ = r.value("loss_read", std::string("step"));  // a peer without the key read it every step
    return r.at("seconds").get<double>();
  }
  void teardown() override {
    peer_.reset();
    if (spec_.cleanup) spec_.cleanup();
  }
  double child_cpu_seconds() const override { return peer_ ? peer_->cpu_seconds : 0; }  // all its threads
  bool fixed_repetitions() const override { return true; }
  bool manual_time() const override { return true; }
  long iterations() const override { return 1; }
  int repetitions() const override { return reps_; }
  Work work() const override { return spec_.work; }
  Metric metric() const override { return spec_.metric; }
  void annotate(json& r) const override {
    r.update(spec_.keys);
    if (peer_) peer_->annotate(r);
    r["mean_loss"] = loss_;
    r["loss_read"] = loss_read_;
  }

 private:
  PeerSpec spec_;
  int reps_;
  std::unique_ptr<PeerChild> peer_;
  double loss_ = NAN;
  std::string loss_read_ = "step";
};

// Axis "input" (--input sets it); "all" expands to the four modes.
std::vector<std::string> input_modes(const SuiteOptions& o) {
  std::vector<std::string> out;
  for (const auto& m : axis_strings(o, "input")) {
    if (m == "all") {
      for (const char* x : {"pageable", "pinned", "prefetch", "resident"}) out.push_back(x);
    } else {
      models::parse_input_mode(m);
      out.push_back(m);
    }
  }
  return out;
}

}  // namespace

void add_training_cases(std::vector<CaseSpec>& cases, const std::string& suite,
                        std::vector<std::pair<std::string, json>> lead, const std::string& device, long long batch,
                        long long images, const SuiteOptions& o, bool lecture) {
  if (images <= 0) throw UsageError("images must be positive");
  if (batch <= 0) throw UsageError("--batch must be positive");
  const std::string model = lead.front().second.get<std::string>();
  const bool graph = o.extra.value("cuda_graph", false), quick = o.quick;
  const auto gpu_inputs = input_modes(o);  // checked on every device
  const auto inputs = device == "cpu" ? std::vector<std::string>{"pageable"} : gpu_inputs;
  std::vector<DType> dtypes;
  for (const auto& d : axis_strings(o, "dtype")) dtypes.push_back(parse_dtype(d));
  // fp16 or tf32 alone on a CPU-only run cannot run anywhere: a usage error, not a table of skips.
  models::check_dtypes_for_run(dtypes, std::any_of(o.devices.begin(), o.devices.end(), is_gpu));
  for (DType t : dtypes)
    for (const auto& in : inputs) {
      if (device == "cpu" && !models::dtype_supported(t, false)) continue;
      CaseId id{suite, "train", device, dtype_name(t), lead};
      id.with("batch", batch).with("images", images);
      if (device != "cpu") id.with("input", in).with("cuda_graph", graph);
      const auto mode = models::parse_input_mode(in);
      cases.push_back({id, [=] {
                         return std::make_unique<TrainingCase>(model, device, int(batch), std::size_t(images), mode,
                                                               graph, lecture, quick, t);
                       }});
    }
  const auto feed = feed_of(o, device);
  if (!feed) return;
  for (DType t : dtypes) {
    if (device == "cpu" && !models::dtype_supported(t, false)) continue;
    CaseId id{suite, "train", device, dtype_name(t), lead};
    id.with("batch", batch).with("images", images).with("fed_by", feed->by);
    if (device != "cpu") id.with("cuda_graph", graph);
    cases.push_back({id, [=] {
                       auto c = std::make_unique<TrainingCase>(model, device, int(batch), std::size_t(images),
                                                               models::InputMode::pageable, graph, lecture, quick, t);
                       c->fed_by(feed);
                       return c;
                     }});
  }
}

std::shared_ptr<const Feed> feed_of(const SuiteOptions& o, const std::string& device) {
  const std::string spec = o.extra.value("loader", "");
  if (spec.empty()) return nullptr;
  auto f = std::make_shared<Feed>();
  f->by = spec;
  f->o = ld::parse_loader_options(spec.find('=') == std::string::npos ? "preset=" + spec : spec);
  if (device != "cpu" && spec.find("pin=") == std::string::npos) f->o.pin = true;  // the GPU's batches arrive pinned
  return f;
}

void add_peer_case(std::vector<CaseSpec>& cases, const std::string& suite, const std::string& device, long long batch,
                   long long images, int repetitions, std::shared_ptr<const Feed> feed) {
  peer_threads_args();  // a bad DLBENCH_PEER_THREADS is bad usage (exit 2), before any case runs
  CaseId id{suite, "train", device, "fp32", {}};
  id.with("model", "net128").with("impl", "pytorch").with("batch", batch).with("images", images);
  if (feed) id.with("fed_by", feed->by);
  PeerSpec p;
  p.script = "pytorch_lecture.py";
  p.args = {"--device", device, "--batch", std::to_string(batch), "--images", std::to_string(images)};
  p.request = "epoch";
  p.work = {0, 0, double(images)};
  p.keys["fed_by"] = feed ? feed->by : "resident";
  if (feed)  // torchvision over the same files, its own DataLoader
    p.prepare = [feed, images](PeerSpec& s) {
      ld::LoaderOptions lo = with_dataset(feed->o, std::size_t(images));
      const auto src = open_dataset(lo);
      if (src->format() == ld::Format::cifar_binary) throw Unsupported("pytorch peer: torchvision reads no CIFAR-10 binary batches");
      const std::string n = std::to_string(src->size());  // the dataset's samples
      *(std::find(s.args.begin(), s.args.end(), "--images") + 1) = n;
      s.work = {0, 0, double(src->size())};
      for (const std::string& a : {std::string("--data"), src->path(), std::string("--data-format"),
                                   std::string(src->format() == ld::Format::cifar_python ? "python" : "folder"), std::string("--workers"),
                                   std::to_string(lo.workers), std::string("--pin"), std::string(lo.pin ? "on" : "off"),
                                   std::string("--prefetch"), std::to_string(lo.prefetch), std::string("--seed"), std::to_string(lo.seed)})
        s.args.push_back(a);
    };
  add_peer(cases, id, p, repetitions);
}

int peer_repetitions(const SuiteOptions& o) {
  if (o.extra.value("peer", "") != "pytorch") return 0;
  peer_threads_args();
  return o.repetitions > 0 ? o.repetitions : o.quick ? 2 : 5;
}

void add_peer(std::vector<CaseSpec>& cases, const CaseId& id, const PeerSpec& spec, int repetitions) {
  cases.push_back({id, [=] { return std::make_unique<PeerCase>(spec, repetitions); }});
}

}  // namespace dlb::bench
