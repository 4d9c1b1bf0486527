// `dlbench train --model M --dataset SPEC --epochs N --device D [--batch B] [--lr X]`: trains one of
// the seed models on a dataset (synthetic, fashion-mnist, or a folder of CIFAR-10 / MNIST files),
// printing the loss per epoch, the test accuracy (or reconstruction loss) and imgs/s.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "harness/commands.h"
#include "kernels/common/device.h"
#include "kernels/common/errors.h"
#include "models/data.h"
#include "models/trainer.h"

namespace dlb::harness {

namespace {
struct TrainFlags {
  std::string model = "net128", dataset = "synthetic", device = "cpu", input = "pageable";
  int epochs = 1, batch = 64;
  long long limit = 0;
  double lr = 0;
  bool cuda_graph = false;
};

std::string resolve_device(const std::string& d) {
  if (d == "cpu") return d;
  if (d == "cuda" || d == "gpu" || d.rfind("cuda:", 0) == 0) {
    const CudaInfo& cu = cuda_info();
    if (!cu.available) throw UsageError("--device " + d + ": " + cu.reason);
    if (d == "cuda" || d == "gpu") return "cuda:0";
    const std::string n = d.substr(5);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--device '" + d + "': expected cuda:N with N a GPU index");
    if (std::stoi(n) >= int(cu.gpus.size())) throw UsageError("--device " + d + ": no such CUDA device");
    return d;
  }
  throw UsageError("--device '" + d + "': unknown device (expected cpu, cuda or cuda:N)");
}

int run_train(const TrainFlags& f) {
  // Everything about the flags is checked before the data is read.
  bool known = false;
  for (const auto& m : models::model_names()) known |= m == f.model;
  if (!known) throw UsageError("--model '" + f.model + "': unknown model (expected net128, mlp, convnet or autoencoder)");
  if (f.batch <= 0) throw UsageError("--batch must be a positive integer, got " + std::to_string(f.batch));
  if (f.epochs <= 0) throw UsageError("--epochs must be a positive integer, got " + std::to_string(f.epochs));
  if (f.limit < 0) throw UsageError("--limit must be >= 0");
  if (f.lr < 0 || f.lr != f.lr) throw UsageError("--lr must be a positive number");
  models::TrainOptions o;
  o.device = resolve_device(f.device);
  o.input = models::parse_input_mode(f.input);
  o.cuda_graph = f.cuda_graph;

  models::Split data = models::load_dataset(f.dataset);
  models::Dataset& train = data.train;
  if (f.limit > 0 && std::size_t(f.limit) < train.size()) {
    const std::size_t item = std::size_t(train.c) * train.h * train.w;
    train.labels.resize(f.limit);
    train.images.resize(std::size_t(f.limit) * item);
  }
  if (train.size() == 0) throw InputError("--dataset " + f.dataset + ": no training images");
  auto model = models::make_model(f.model, train.c, train.h, train.w);
  model->init(0);
  models::OptimizerConfig opt = models::default_optimizer(f.model);
  if (f.lr > 0) opt.lr = static_cast<float>(f.lr);
  auto trainer = models::make_trainer(*model, opt, o);

  std::printf("model %s: %zu parameters; dataset %s: %zu train / %zu test images of %dx%dx%d\n", f.model.c_str(),
              model->num_params(), train.name.c_str(), train.size(), data.test.size(), train.c, train.h, train.w);
  std::printf("optimizer %s(lr %g%s), batch %d, device %s\n", opt.kind.c_str(), opt.lr,
              opt.kind == "sgd" ? (", momentum " + std::to_string(opt.momentum).substr(0, 4)).c_str() : "", f.batch,
              trainer->describe().c_str());
  if (o.device != "cpu") std::printf("GPU memory after moving the model: %g MB\n", trainer->model_device_bytes() / 1e6);
  std::fflush(stdout);
  double total_s = 0;
  for (int e = 1; e <= f.epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = trainer->train_epoch(train, f.batch);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_s += s;
    std::printf("epoch %d/%d: loss %.4f  (%.2f s, %.0f imgs/s)\n", e, f.epochs, loss, s, train.size() / s);
    std::fflush(stdout);
  }
  if (data.test.size() > 0) {
    const double v = trainer->evaluate(data.test, std::max(f.batch, 256));
    if (model->loss() == models::LossKind::mse)
      std::printf("test reconstruction loss (MSE): %.5f on %zu images\n", v, data.test.size());
    else
      std::printf("test accuracy: %.2f%% (%zu images)\n", 100.0 * v, data.test.size());
  }
  std::printf("train throughput: %.0f imgs/s over %d epoch(s)\n", f.epochs * train.size() / total_s, f.epochs);
  if (o.device != "cpu") std::printf("GPU peak memory: %g MB\n", trainer->peak_device_bytes() / 1e6);
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
  sub->add_option("--lr", f->lr, "Learning rate (default: the model's: SGD 0.001 for net128, Adam 0.001 otherwise)");
  sub->add_option("--limit", f->limit, "Use only the first N training images (0 = all)");
  sub->add_option("--input", f->input, "GPU input pipeline: pageable | pinned | prefetch | resident");
  sub->add_flag("--cuda-graph", f->cuda_graph, "Capture the GPU training step in a CUDA graph");
  sub->callback([f, &rc] { rc = run_train(*f); });
}

}  // namespace dlb::harness
