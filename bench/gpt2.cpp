// Suite "gpt2": GPT-2 training steps (models/gpt2.h: forward, backward, AdamW) on llm.c's configs,
// ours (impl=ours: our fused causal attention, LayerNorm, GELU, the tied head, fp32, CPU) against
// the PyTorch peer (impl=pytorch: bench/peers/pytorch_gpt2.py, eager or torch.compile, CPU or GPU,
// on the same weights and tokens written as llm.c files). Seeded GPT-2 init and random tokens.
// Work: the napkin FLOPs of a step (6 N per token + causal attention, gpt2_flops_per_token), so
// pct_of_peak is the MFU against the measured fp32 FMA peak (CPU) or the GPU's fp32 peak; tokens/s
// is derived from the same time. Names: gpt2/train/<device>/fp32/config=<c>/impl=<i>/batch=<B>/seq=<T>.
// Ours is verified before timing: the fp32 loss of one sequence against the model's fp64 reference;
// the peer: its loss is finite (its numbers are PyTorch's; the parity is tests/test_gpt2_peer.cpp's).
// The GPU has no gpt2 of ours yet (the CUDA trainer refuses its layers): those cases are unsupported.
// --profile records one step of ours layer by layer (bench/profile.h).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "bench/markdown.h"
#include "bench/suite.h"
#include "bench/training_cases.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "models/gpt2.h"

namespace dlb::bench {

namespace {

namespace fs = std::filesystem;
using models::Gpt2Config;

struct Point {
  std::string config;
  int B, T;
};

Gpt2Config config_of(const Point& p) {
  Gpt2Config c = models::gpt2_config(p.config);
  if (p.T > c.max_seq_len)
    throw Unsupported(p.config + ": seq " + std::to_string(p.T) + " over its " + std::to_string(c.max_seq_len) + " positions");
  return c;
}

double step_flops(const Point& p) {
  return models::gpt2_flops_per_token(models::gpt2_config(p.config), p.T) * double(p.B) * p.T;
}

void annotate_point(json& r, const Point& p, double steps) {
  const Gpt2Config c = models::gpt2_config(p.config);
  r["flops_per_token"] = models::gpt2_flops_per_token(c, p.T);
  r["tokens_per_iteration"] = double(p.B) * p.T * steps;
  r["params"] = c.num_params();
}

// Ours: one AdamW step per iteration on the next batch of the token stream.
class OursCase final : public Case {
 public:
  explicit OursCase(Point p) : p_(std::move(p)) {}
  void setup() override {
    const Gpt2Config c = config_of(p_);
    try {
      model_ = models::make_gpt2(models::gpt2_random_weights(c, 1), p_.T);
      drop_reference();
      opt_ = std::make_unique<models::Optimizer>(models::gpt2_optimizer(), model_->params());
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("gpt2 " + p_.config);
    }
    batches_ = std::make_unique<models::Gpt2Batcher>(models::gpt2_random_tokens(std::size_t(8) * p_.B * p_.T + 1, c.vocab_size, 2),
                                                     p_.B, p_.T);
  }
  CheckResult verify() override {
    // One sequence: the fp32 loss against the fp64 reference's (the LM head's fp64 loops cost
    // 2 T C V: 5 GFLOP at gpt2-124m T 64).
    models::Batch one = batches_->next();
    one.n = 1;
    model_->zero_grad();
    const double got = model_->forward_backward(one);
    model_->sync_ref();
    const double want = model_->loss_ref(nullptr, one);
    drop_reference();
    batches_->rewind();
    model_->zero_grad();
    return judge(std::abs(got - want) / std::max(1e-12, std::abs(want)), default_tolerance(DType::fp32) * 10,
                 "gpt2 loss of one sequence, fp32 vs fp64");
  }
  double run() override {
    model_->zero_grad();
    loss_ = model_->forward_backward(batches_->next());
    opt_->step();
    return 0;
  }
  // --profile: one more step on the next batch, region by region (each layer's forward and backward,
  // the loss, zero_grad, AdamW), its loss and gradients checked against an unprofiled step's.
  bool profile(ProfileResult& out) override {
    const models::Batch& b = batches_->next();
    model_->zero_grad();
    const double want = model_->forward_backward(b);
    std::vector<std::vector<float>> ref;
    for (models::Param* q : model_->params()) ref.push_back(q->grad);
    models::WallProfiler prof;
    double got = NAN;
    {
      models::ProfileScope step(&prof, "step", "step");
      {
        models::ProfileScope r(&prof, "zero_grad", "optimizer");
        model_->zero_grad();
      }
      model_->set_profiler(&prof);
      got = model_->forward_backward(b);
      model_->set_profiler(nullptr);
      models::ProfileScope r(&prof, "optimizer", "optimizer");
      opt_->step();  // AdamW leaves the gradients as they are: compared below
    }
    double worst = std::abs(got - want) / std::max(1e-12, std::abs(want));
    const auto ps = model_->params();
    for (std::size_t i = 0; i < ps.size(); ++i)
      worst = std::max(worst, max_rel_err(ps[i]->grad.data(), ref[i].data(), ps[i]->size()));
    out.max_rel_err = worst;
    out.regions = prof.regions();
    out.device = "cpu";
    out.verified = std::isfinite(got) && out.max_rel_err <= 1e-5;
    out.check = "loss and gradients equal an unprofiled step's";
    return true;
  }
  Work work() const override { return {step_flops(p_), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_point(r, p_, 1);
    r["loss"] = loss_;
  }
  void teardown() override { opt_.reset(), model_.reset(), batches_.reset(); }

 private:
  // The fp64 copies every Param holds (2 GB at gpt2-124m): only verify's forward reads them (and
  // fills them first). Dropped, the case stays under the harness's 4 GB interleaving window.
  void drop_reference() {
    for (models::Param* q : model_->params()) q->ref_value = {}, q->ref_grad = {};
  }
  Point p_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Optimizer> opt_;
  std::unique_ptr<models::Gpt2Batcher> batches_;
  double loss_ = NAN;
};

class NoGpuCase final : public Case {
 public:
  void setup() override { throw Unsupported("gpt2 impl=ours: no CUDA path yet (the GPU trainer has no attention)"); }
  CheckResult verify() override { return {}; }
  double run() override { return 0; }
  Work work() const override { return {}; }
  Metric metric() const override { return Metric::gflops; }
};

// The peer's files: the same seeded weights and tokens as ours, written per case (removed after it).
void write_peer_files(const Point& p, const fs::path& dir) {
  const Gpt2Config c = config_of(p);
  fs::create_directories(dir);
  if (!fs::exists(dir / "model.bin")) models::write_gpt2_checkpoint((dir / "model.bin").string(), models::gpt2_random_weights(c, 1));
  models::write_gpt2_tokens((dir / "tokens.bin").string(),
                            models::gpt2_random_tokens(std::size_t(p.B) * p.T + 1, c.vocab_size, 2));
}

// The peer's cases before ours at each point: the harness sets up a window's cases in sweep order
// and adds none once our process has grown past its memory bound (ours holds 2.6 GB at gpt2-124m);
// the peer's memory is its own process's, so with it first both are timed in one interleaved window.
std::vector<std::string> peer_first(std::vector<std::string> impls) {
  std::stable_partition(impls.begin(), impls.end(), [](const std::string& i) { return i != "ours"; });
  return impls;
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const auto modes = axis_strings(o, "peer_mode");
  for (const auto& config : axis_strings(o, "config")) {
    models::gpt2_config(config);  // a bad name is bad usage, before any case runs
    for (const auto& dev : o.devices)
      for (long long B : axis_ints(o, "batch"))
        for (long long T : axis_ints(o, "seq"))
          for (const auto& impl : peer_first(axis_strings(o, "impl"))) {
            const Point p{config, int(B), int(T)};
            auto id = [&](const std::string& i) {
              CaseId c{"gpt2", "train", dev, "fp32", {}};
              return c.with("config", config).with("impl", i).with("batch", B).with("seq", T);
            };
            if (impl == "ours") {
              if (is_gpu(dev)) cases.push_back({id("ours"), [] { return std::make_unique<NoGpuCase>(); }});
              else cases.push_back({id("ours"), [p] { return std::make_unique<OursCase>(p); }});
              continue;
            }
            if (impl != "pytorch") throw UsageError("gpt2: impl '" + impl + "' (expected ours or pytorch)");
            const int steps = is_gpu(dev) ? 10 : 1;
            for (const auto& mode : modes) {
              const fs::path dir = fs::temp_directory_path() / ("dlb-gpt2-" + std::to_string(::getpid()) + "-" + config + "-" +
                                                                std::to_string(B) + "x" + std::to_string(T));
              PeerSpec s;
              s.script = "pytorch_gpt2.py";
              s.args = {"--checkpoint", (dir / "model.bin").string(), "--tokens", (dir / "tokens.bin").string(),
                        "--batch", std::to_string(B), "--seq", std::to_string(T), "--device", dev == "cpu" ? "cpu" : dev,
                        "--mode", mode, "--steps", std::to_string(steps)};
              s.request = "steps";
              s.work = {step_flops(p) * steps, 0, 0};
              s.metric = Metric::gflops;
              annotate_point(s.keys, p, steps);
              s.keys["peer_mode"] = mode;
              s.prepare = [p, dir](PeerSpec&) { write_peer_files(p, dir); };
              s.cleanup = [dir] {
                std::error_code ec;
                fs::remove_all(dir, ec);
              };
              CaseId c = id("pytorch");
              if (mode != "eager") c = id("pytorch-" + mode);
              add_peer(cases, c, s, o.repetitions > 0 ? o.repetitions : 5);
            }
          }
  }
  return cases;
}

// tokens/s from the time the harness measured, and the MFU under its usual name.
void derive(std::vector<json>& entries) {
  for (json& e : entries) {
    if (!e.contains("gflops") || !e.contains("flops_per_token")) continue;
    e["tokens_per_s"] = e.at("gflops").get<double>() * 1e9 / e.at("flops_per_token").get<double>();
    if (e.contains("pct_of_peak")) e["mfu_pct"] = e.at("pct_of_peak");
  }
}

std::string fmt(double v, const char* f) {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void summarize(const std::vector<json>& records, std::ostream& out) {
  std::vector<std::vector<std::string>> rows{{"Device", "Config", "Impl", "Batchsize", "Seq len", "tokens/s", "MFU"}};
  for (const auto& r : records) {
    if (!r.contains("gflops") || !r.contains("flops_per_token")) continue;
    const double tps = r.at("gflops").get<double>() * 1e9 / r.at("flops_per_token").get<double>();
    const std::string dev = r.value("device", "");
    rows.push_back({dev == "cpu" ? "CPU" : "GPU (" + dev + ")", r.value("config", ""), r.value("impl", ""),
                    std::to_string(r.value("batch", 0)), std::to_string(r.value("seq", 0)), fmt(tps, "%.0f"),
                    r.contains("pct_of_peak") ? fmt(r.at("pct_of_peak").get<double>(), "%.1f%%") : "-"});
  }
  out << "\n### gpt2: training step throughput (AdamW, fp32)\n\n";
  if (rows.size() == 1) {
    out << "(no gpt2 case finished)\n";
    return;
  }
  print_markdown(out, rows, true);
}

}  // namespace

DLB_SUITE(gpt2)
    .about("GPT-2 training steps (forward, backward, AdamW) on llm.c's configs: ours (CPU) against the PyTorch peer "
           "(eager, compile; CPU, GPU); tokens/s and MFU")
    .axis("config", {"gpt2-124m"}, {"gpt-mini"})
    .axis("batch", {4}, {1})
    .axis("seq", {64, 256}, {32})
    .axis("impl", {"ours", "pytorch"}, {"ours"})
    .axis("peer_mode", {"eager"})
    .takes({flag::batch(), flag::profile(), FlagSpec{"--seq-len", "sequence lengths (tokens per sample)", "seq", true, FlagSpec::Parse::ints, 1 << 16},
            FlagSpec{"--config", "GPT-2 configs: gpt2-124m, gpt-mini", "config", true, FlagSpec::Parse::words, 0,
                     {"gpt2-124m", "gpt-mini"}},
            FlagSpec{"--impl", "ours, pytorch", "impl", true, FlagSpec::Parse::words, 0, {"ours", "pytorch"}},
            FlagSpec{"--peer-mode", "the PyTorch peer's modes: eager, compile", "peer_mode", true, FlagSpec::Parse::words, 0,
                     {"eager", "compile"}}})
    .cases(expand)
    .derived(derive)
    .summary(summarize);

}  // namespace dlb::bench
