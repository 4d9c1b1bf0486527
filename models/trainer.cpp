// The CPU trainer and the shared loader helpers (see trainer.h).
#include "models/trainer.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/common/errors.h"
#include "kernels/cpu/threads.h"
#include "models/loader/loader.h"
#include "models/replicas.h"

namespace dlb::models {

InputMode parse_input_mode(const std::string& s) {
  if (s == "pageable") return InputMode::pageable;
  if (s == "pinned") return InputMode::pinned;
  if (s == "prefetch") return InputMode::prefetch;
  if (s == "resident") return InputMode::resident;
  throw UsageError("--input '" + s + "': unknown mode (expected pageable, pinned, prefetch or resident)");
}

const char* input_mode_name(InputMode m) {
  switch (m) {
    case InputMode::pageable: return "pageable";
    case InputMode::pinned: return "pinned";
    case InputMode::prefetch: return "prefetch";
    case InputMode::resident: return "resident";
  }
  return "pageable";
}

std::vector<std::uint32_t> epoch_order(std::size_t size, std::uint64_t seed) {
  std::vector<std::uint32_t> idx(size);
  std::iota(idx.begin(), idx.end(), 0u);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (std::size_t i = size; i > 1; --i) {  // Fisher-Yates with a splitmix64 stream
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::swap(idx[i - 1], idx[z % i]);
  }
  return idx;
}

void gather_batch(const Dataset& d, const std::vector<std::uint32_t>& idx, std::size_t first, int n, float* x,
                  std::int32_t* y) {
  const std::size_t item = std::size_t(d.c) * d.h * d.w;
  for (int i = 0; i < n; ++i) {
    const std::size_t j = idx[first + i];
    std::memcpy(x + i * item, d.images.data() + j * item, item * sizeof(float));
    if (y) y[i] = d.labels[j];
  }
}

void check_loader(const Model& m, const loader::Loader& l) {
  const Shape in = m.input_shape(1);
  const loader::Source& s = l.source();
  if (s.channels() != in.c() || s.height() != in.h() || s.width() != in.w())
    throw Unsupported("the loader gives " + std::to_string(s.channels()) + "x" + std::to_string(s.height()) + "x" +
                      std::to_string(s.width()) + " images (" + s.path() + "); model " + m.name() + " expects " +
                      in.str().substr(2) + " (the loader has no resize)");
}

double Trainer::train_epoch(loader::Loader& l) {
  double total = 0;
  long steps = 0;
  while (loader::BatchLease b = l.next()) {
    total += train_batch(Batch{b->x, b->labels, nullptr, b->n});
    ++steps;
  }
  return total / std::max(1L, steps);
}

namespace {

void check_dataset(const Model& m, const Dataset& d, int batch) {
  if (batch <= 0) throw UsageError("batch size must be positive, got " + std::to_string(batch));
  const Shape in = m.input_shape(1);
  if (d.c != in.c() || d.h != in.h() || d.w != in.w())
    throw InputError("dataset '" + d.name + "' has " + std::to_string(d.c) + "x" + std::to_string(d.h) + "x" +
                     std::to_string(d.w) + " images; model " + m.name() + " expects " + in.str().substr(2));
  if (d.size() == 0) throw InputError("dataset '" + d.name + "' is empty");
}

// The CPU kernels split each batch over kernel_threads() threads with single-threaded GEMMs, so
// OpenBLAS stays at 1 thread while this trainer works (its idle workers then sleep instead of
// spinning next to ours); with one kernel thread OpenBLAS keeps its own threads.
class CpuTrainer final : public Trainer {
 public:
  CpuTrainer(Model& m, const OptimizerConfig& cfg, const TrainOptions& o)
      : m_(m), opt_(cfg, m.params()), seed_(o.shuffle_seed) {}

  double train_epoch(const Dataset& d, int batch) override {
    check_dataset(m_, d, batch);
    cpu::BlasThreadsScope blas(blas_threads());
    const auto idx = epoch_order(d.size(), seed_++);
    const std::size_t item = std::size_t(d.c) * d.h * d.w;
    x_.resize(std::size_t(batch) * item);
    y_.resize(batch);
    double total = 0;
    long steps = 0;
    for (std::size_t first = 0; first < d.size(); first += batch) {
      const int n = int(std::min<std::size_t>(batch, d.size() - first));
      gather_batch(d, idx, first, n, x_.data(), y_.data());
      total += replicas_.step(m_, opt_, Batch{x_.data(), y_.data(), nullptr, n});
      ++steps;
    }
    return total / std::max(1L, steps);
  }

  double train_epoch(loader::Loader& l) override {
    check_loader(m_, l);
    cpu::BlasThreadsScope blas(blas_threads());
    double total = 0;
    long steps = 0;
    while (loader::BatchLease b = l.next()) {
      total += replicas_.step(m_, opt_, Batch{b->x, b->labels, nullptr, b->n});
      ++steps;
    }
    return total / std::max(1L, steps);
  }

  double evaluate(const Dataset& d, int batch) override {
    check_dataset(m_, d, batch);
    cpu::BlasThreadsScope blas(blas_threads());
    const std::size_t item = std::size_t(d.c) * d.h * d.w;
    std::size_t right = 0;
    double loss = 0;
    for (std::size_t first = 0; first < d.size(); first += batch) {
      const int n = int(std::min<std::size_t>(batch, d.size() - first));
      const float* x = d.images.data() + first * item;
      const auto& out = m_.predict(x, n);
      if (m_.loss() == LossKind::mse) {
        loss += double(loss_forward_backward(LossKind::mse, out.data(), Batch{x, nullptr, nullptr, n}, out.size(), 0,
                                             nullptr)) * n;
        continue;
      }
      const int classes = int(out.size() / n);
      for (int i = 0; i < n; ++i) {
        const float* z = out.data() + std::size_t(i) * classes;
        right += int(std::max_element(z, z + classes) - z) == d.labels[first + i];
      }
    }
    return m_.loss() == LossKind::mse ? loss / d.size() : double(right) / d.size();
  }

  float profile_step(const Dataset& d, int batch, Profiler& p) override {
    check_dataset(m_, d, batch);
    cpu::BlasThreadsScope blas(blas_threads());
    const int n = int(std::min<std::size_t>(batch, d.size()));
    std::vector<std::uint32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0u);
    x_.resize(std::size_t(n) * d.c * d.h * d.w);
    y_.resize(n);
    float loss = 0;
    ProfileScope step(&p, "step", "step");
    {
      ProfileScope r(&p, "data copy", "copy");
      gather_batch(d, idx, 0, n, x_.data(), y_.data());
    }
    {
      ProfileScope r(&p, "zero_grad", "optimizer");
      m_.zero_grad();
    }
    m_.set_profiler(&p);
    try {
      loss = m_.forward_backward(Batch{x_.data(), y_.data(), nullptr, n});
    } catch (...) {
      m_.set_profiler(nullptr);
      throw;
    }
    m_.set_profiler(nullptr);
    ProfileScope r(&p, "optimizer", "optimizer");
    opt_.step();
    return loss;
  }

  float gradients(const Batch& b) override {
    cpu::BlasThreadsScope blas(blas_threads());
    m_.set_step(true, std::uint64_t(opt_.steps()));
    m_.zero_grad();
    return m_.forward_backward(b);
  }

  float infer_batch(const Batch& b) override {
    cpu::BlasThreadsScope blas(blas_threads());
    return forward_loss(m_, b);
  }

  // The sequence models' step: their GEMMs are few and large (a projection over every position), so
  // OpenBLAS keeps its threads; our kernels split rows between its calls.
  float train_batch(const Batch& b) override {
    cpu::BlasThreadsScope blas(blas_threads());  // as train_epoch: OpenBLAS's team would fight our pool's
    m_.set_step(true, std::uint64_t(opt_.steps()));
    return train_step(m_, opt_, b);
  }

  std::string describe() const override {
    const int t = cpu::kernel_threads();
    if (t == 1) return "cpu (1 thread, OpenBLAS included)";
    return "cpu (" + std::to_string(t) + " threads: batch split, single-threaded OpenBLAS; batches <= " +
           std::to_string(ReplicaStep::kMaxBatch) + ": a model replica per thread)";
  }

 private:
  // OpenBLAS inside a step runs on the calling thread: with several kernel threads our pool splits
  // the work; with one (DLB_CPU_THREADS=1) a second OpenBLAS thread would break the one-thread promise.
  static int blas_threads() { return 1; }

  Model& m_;
  Optimizer opt_;
  ReplicaStep replicas_;  // small batches: a model replica per kernel thread (train_step otherwise)
  std::uint64_t seed_;
  std::vector<float> x_;
  std::vector<std::int32_t> y_;
};

}  // namespace

float forward_loss(Model& m, const Batch& b) {
  m.set_step(false, 0);  // eval mode: dropout off (the next training step sets its own step)
  const auto& out = m.predict(b);
  return loss_forward_backward(m.loss(), out.data(), b, out.size(), m.output_shape(b.n).last(), nullptr);
}

float Trainer::infer_batch(const Batch&) {
  throw Unsupported("infer_batch: this trainer (" + describe() + ") has no forward-only call");
}

float Trainer::profile_step(const Dataset&, int, Profiler&) {
  throw Unsupported("--profile: this trainer (" + describe() + ") records no regions");
}

float Trainer::profile_gradients(const Batch&, Profiler&) {
  throw Unsupported("--profile: this trainer (" + describe() + ") records no regions of a token batch");
}

std::unique_ptr<Trainer> make_trainer(Model& model, const OptimizerConfig& opt, const TrainOptions& o) {
  if (o.device == "cpu") {
    // CPU bf16 autocast is models::AmpTrainer (amp suite, `dlbench train --dtype bf16`), not this loop.
    if (o.dtype != DType::fp32)
      throw UsageError(std::string("the CPU trainer runs fp32, not ") + dtype_name(o.dtype) +
                       " (CPU bf16 autocast: models::AmpTrainer)");
    return std::make_unique<CpuTrainer>(model, opt, o);
  }
  if (o.device.rfind("cuda", 0) == 0) {
#ifdef DLB_HAVE_CUDA
    return make_gpu_trainer(model, opt, o);
#else
    throw Unsupported("this build has no CUDA backend");
#endif
  }
  throw UsageError("--device '" + o.device + "': expected cpu or cuda[:N]");
}

}  // namespace dlb::models
