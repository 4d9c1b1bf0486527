// `dlbench train --model M --dataset SPEC --epochs N --device D [--batch B] [--lr X]`: trains one of
// the seed models on a dataset (synthetic, fashion-mnist, or a folder of CIFAR-10 / MNIST files),
// printing the loss per epoch, the test accuracy (or reconstruction loss) and imgs/s.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "harness/commands.h"
#include "harness/run/run.h"
#include "harness/sweep.h"
#include "kernels/common/device.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/gemm.h"
#include "models/amp.h"
#include "models/data.h"
#include "models/trainer.h"

namespace dlb::harness {

namespace {
struct TrainFlags {
  std::string model = "net128", dataset = "synthetic", device = "cpu", input = "pageable", dtype = "fp32";
  std::string epochs = "1", batch = "64", limit = "0", lr;  // numbers: parsed by parse_int / parse_real
  bool cuda_graph = false, lr_given = false;
};

// One device, checked like `run --device` (harness/run/run.h); "cuda" means the first GPU.
std::string resolve_device(const std::string& d) {
  const auto devs = resolve_devices(d);
  if (d == "all" || d.find(',') != std::string::npos || (devs.size() != 1 && d != "cuda" && d != "gpu"))
    throw UsageError("--device '" + d + "': train runs on one device (cpu, cuda or cuda:N)");
  return devs.front();
}

// Mixed-precision epoch on the CPU (bf16 autocast, models/amp.h): same order and batches as the
// fp32 trainer, the step done by AmpTrainer with fp32 master weights.
double amp_epoch(models::AmpTrainer& amp, const models::Dataset& d, int batch, std::uint64_t seed) {
  const auto idx = models::epoch_order(d.size(), seed);
  const std::size_t item = std::size_t(d.c) * d.h * d.w;
  std::vector<float> x(std::size_t(batch) * item);
  std::vector<std::int32_t> y(batch);
  double total = 0;
  long steps = 0;
  for (std::size_t first = 0; first < d.size(); first += batch, ++steps) {
    const int n = int(std::min<std::size_t>(batch, d.size() - first));
    models::gather_batch(d, idx, first, n, x.data(), y.data());
    total += amp.step(models::Batch{x.data(), y.data(), nullptr, n});
  }
  return total / std::max(1L, steps);
}

int run_train(const TrainFlags& f) {
  // Everything about the flags is checked before the data is read.
  bool known = false;
  for (const auto& m : models::model_names()) known |= m == f.model;
  if (!known) throw UsageError("--model '" + f.model + "': unknown model (expected net128, mlp, convnet or autoencoder)");
  const int batch = static_cast<int>(parse_int(f.batch, "--batch", 1, 1 << 20));
  const int epochs = static_cast<int>(parse_int(f.epochs, "--epochs", 1, 100000));
  const long long limit = parse_int(f.limit, "--limit", 0, 1LL << 40);
  const double lr = f.lr_given ? parse_real(f.lr, "--lr", 1e-12, 1e3) : 0;
  models::TrainOptions o;
  o.device = resolve_device(f.device);
  const DType dtype = [&] {
    try {
      return parse_dtype(f.dtype);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--dtype: ") + e.what());
    }
  }();
  models::check_dtype_for_device(dtype, o.device != "cpu");
  if (o.device != "cpu") o.dtype = dtype;  // the CUDA trainer runs autocast itself; the CPU's bf16 is AmpTrainer below
  o.input = models::parse_input_mode(f.input);
  o.cuda_graph = f.cuda_graph;

  if (o.device == "cpu") {  // OpenBLAS's buffers, taken while there is room (kernels/cpu/gemm.h)
    const std::string no_room = cpu::openblas_reserve_buffers(true);
    if (!no_room.empty()) throw UsageError("cannot train on the CPU: " + no_room);
  }
  models::Split data = models::load_dataset(f.dataset);
  models::Dataset& train = data.train;
  if (limit > 0 && std::size_t(limit) > train.size())
    throw UsageError("--limit " + f.limit + ": dataset " + f.dataset + " has only " + std::to_string(train.size()) +
                     " training images");
  if (limit > 0 && std::size_t(limit) < train.size()) {
    const std::size_t item = std::size_t(train.c) * train.h * train.w;
    train.labels.resize(limit);
    train.images.resize(std::size_t(limit) * item);
  }
  if (train.size() == 0) throw InputError("--dataset " + f.dataset + ": no training images");
  auto model = models::make_model(f.model, train.c, train.h, train.w);
  model->init(0);
  models::OptimizerConfig opt = models::default_optimizer(f.model);
  if (lr > 0) opt.lr = static_cast<float>(lr);
  auto trainer = models::make_trainer(*model, opt, o);
  std::unique_ptr<models::Optimizer> amp_opt;
  std::unique_ptr<models::AmpTrainer> amp;
  if (dtype != DType::fp32 && o.device == "cpu") {
    amp_opt = std::make_unique<models::Optimizer>(opt, model->params());
    amp = std::make_unique<models::AmpTrainer>(*model, *amp_opt, dtype);
  }

  std::printf("model %s: %zu parameters; dataset %s: %zu train / %zu test images of %dx%dx%d\n", f.model.c_str(),
              model->num_params(), train.name.c_str(), train.size(), data.test.size(), train.c, train.h, train.w);
  std::printf("optimizer %s(lr %g%s), batch %d, dtype %s, device %s\n", opt.kind.c_str(), opt.lr,
              opt.kind == "sgd" ? (", momentum " + std::to_string(opt.momentum).substr(0, 4)).c_str() : "", batch, f.dtype.c_str(),
              trainer->describe().c_str());
  if (o.device != "cpu") std::printf("GPU memory after moving the model: %g MB\n", trainer->model_device_bytes() / 1e6);
  std::fflush(stdout);
  double total_s = 0;
  for (int e = 1; e <= epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = amp ? amp_epoch(*amp, train, batch, e) : trainer->train_epoch(train, batch);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_s += s;
    std::printf("epoch %d/%d: loss %.4f  (%.2f s, %.0f imgs/s)\n", e, epochs, loss, s, train.size() / s);
    std::fflush(stdout);
  }
  if (data.test.size() > 0) {
    const double v = trainer->evaluate(data.test, std::max(batch, 256));
    if (model->loss() == models::LossKind::mse)
      std::printf("test reconstruction loss (MSE): %.5f on %zu images\n", v, data.test.size());
    else
      std::printf("test accuracy: %.2f%% (%zu images)\n", 100.0 * v, data.test.size());
  }
  std::printf("train throughput: %.0f imgs/s over %d epoch(s)\n", epochs * train.size() / total_s, epochs);
  if (o.device != "cpu") std::printf("GPU peak memory: %g MB\n", trainer->peak_device_bytes() / 1e6);
  if (dtype == DType::fp16 && o.device != "cpu") std::printf("final loss scale: %g\n", trainer->loss_scale());
  return 0;
}
}  // namespace

void add_train_command(CLI::App& app, int& rc) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* sub = app.add_subcommand("train", "Train a seed model on a dataset and print loss, accuracy, imgs/s");
  sub->add_option("--model,-m", f->model, "net128 | mlp | convnet | autoencoder (default net128)");
  sub->add_option("--dataset", f->dataset,
                  "synthetic | fashion-mnist | a folder of CIFAR-10 binary batches or MNIST IDX files (default synthetic)");
  sub->add_option("--epochs", f->epochs, "Epochs (default 1)");
  sub->add_option("--device,-d", f->device, "cpu | cuda | cuda:N (default cpu)");
  sub->add_option("--batch", f->batch, "Batch size (default 64)");
  sub->add_option("--dtype", f->dtype, "fp32 (default) | bf16 | fp16 | tf32: autocast with fp32 master weights (CPU: fp32, bf16; fp16 adds loss scaling)");
  sub->add_option("--lr", f->lr, "Learning rate (default: the model's: SGD 0.001 for net128, Adam 0.001 otherwise)");
  sub->add_option("--limit", f->limit, "Use only the first N training images (0 = all)");
  sub->add_option("--input", f->input, "GPU input pipeline: pageable | pinned | prefetch | resident");
  sub->add_flag("--cuda-graph", f->cuda_graph, "Capture the GPU training step in a CUDA graph");
  sub->callback([f, sub, &rc] {
    f->lr_given = sub->count("--lr") > 0;
    rc = run_train(*f);
  });
}

}  // namespace dlb::harness
