// Suite "seq": the seed's sequence models (models/seq_zoo.h: rnn, lstm, transformer) in tokens/s.
// op=train: one epoch of `samples` token windows (full batches, ceil(samples / batch) steps) per
// timed iteration, ours (impl=ours on every device; impl=onednn for rnn and lstm on the CPU, impl=cudnn
// for them on a GPU: cuDNN's RNN API) and with --peer pytorch the seed's own modules
// (bench/peers/pytorch_seq.py, handed the same batches in a file, on the same device) in the same
// interleaved rounds. The GPU rows train in the CUDA sequence trainer (models/cuda/gpu_seq_trainer.h,
// fp32; first run on an H100, 2026-11-27). --dataset: synthetic (default) or text:FILE (character-level windows
// of a local UTF-8 file, read once when the cases are made: a bad file is bad input, exit 2).
// op=infer: forward-only latency of one batch in eval mode (p50 / p99 over the timed calls) for every
// model of the zoo, the four image models too, on the CPU and on a GPU (bench/seq_infer.cpp: on a GPU
// each call is the trainer's infer_batch, the batch's host -> device copy included), ours and the
// peer. Verification: ours against the fp64 reference (one step's loss and
// gradients; the inference output's loss), a GPU's inference loss against the CPU fp32 forward's,
// the peer ran and its loss is finite (the image models' infer peer: its loss equals ours on our
// weights and batch, bench/seq_infer.cpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ostream>
#include <sstream>

#include "bench/graph_check.h"
#include "bench/latency.h"
#include "bench/markdown.h"
#include "bench/napkin.h"
#include "bench/paired.h"
#include "bench/peer.h"
#include "bench/seq_infer.h"
#include "bench/suite.h"
#include "bench/training_cases.h"
#include "models/net.h"
#include "models/seq_zoo.h"
#include "models/trainer.h"

#include <unistd.h>

namespace dlb::bench {

std::shared_ptr<const models::TokenData> seq::windows_for(const Sizes& s, int n) {
  if (s.text) return s.text;
  models::SeqConfig c = s.c;
  return std::make_shared<const models::TokenData>(models::seq_data(c, "synthetic", std::size_t(std::max(s.samples, n)), 1));
}

namespace {

using models::SeqConfig;
using seq::kSeqTolerance;
using seq::Sizes;
using seq::windows_for;

// The first window of training step k: consecutive full batches, wrapping over the windows.
std::size_t first_window(int k, int batch, std::size_t windows) {
  return (std::size_t(k) * std::size_t(batch)) % (windows - std::size_t(batch) + 1);
}

// --- ours -------------------------------------------------------------------------------------

class SeqTrainCase final : public Case {
 public:
  // graph (a GPU): the training step replayed from a CUDA graph (TrainOptions::cuda_graph), verified
  // against the same steps run eagerly.
  SeqTrainCase(Sizes s, std::string device, int batch, bool quick, bool graph = false)
      : s_(std::move(s)), device_(std::move(device)), batch_(batch), quick_(quick), graph_(graph) {}

  void setup() override {
    model_ = models::make_seq_model(s_.c);
    model_->init(0);
    data_ = windows_for(s_, batch_);
    order_.resize(data_->size());
    std::iota(order_.begin(), order_.end(), 0u);
    batcher_ = std::make_unique<models::SeqBatcher>(s_.c);
    models::TrainOptions o;
    o.device = device_, o.cuda_graph = graph_;
    try {
      trainer_ = models::make_trainer(*model_, models::default_optimizer(s_.c.model), o);
    } catch (const std::exception& e) {
      if (device_ == "cpu") throw;
      throw Unsupported(std::string("the GPU trainer refuses ") + s_.c.model + ": " + e.what());
    }
  }

  CheckResult verify() override {
    // One step's loss and gradients on a batch of 2 (the batch dimension's layout matters) against
    // the fp64 reference from the same weights (and dropout masks: the same step number).
    const int n = std::min(batch_, 2);
    const models::Batch& b = batcher_->gather(*data_, order_, 0, n);
    const float loss = trainer_->gradients(b);
    model_->sync_ref();
    const double ref = model_->forward_backward_ref(nullptr, b);
    WorstError w;
    w.loss(loss, ref);
    for (auto* p : model_->params()) w.add(max_rel_err(p->grad.data(), p->ref_grad.data(), p->size()), p->name + "'s gradient");
    CheckResult r =
        judge(w.err, kSeqTolerance, "loss and gradients of one step (fp32 vs the fp64 reference)" + w.said());
    if (graph_ && r.ok) r = verify_graph_steps();
    return r;
  }
  // The timed batch's training steps from the graph against an eager twin (bench/graph_check.h).
  CheckResult verify_graph_steps() {
    auto twin = models::make_seq_model(s_.c);
    twin->copy_params_from(*model_);
    models::TrainOptions o;
    o.device = device_;
    auto eager = models::make_trainer(*twin, models::default_optimizer(s_.c.model), o);
    return check_graph_steps(*trainer_, *model_, *eager, *twin, 3, [&](int k) -> const models::Batch& {
      return batcher_->gather(*data_, order_, first_window(k, batch_, data_->size()), batch_);
    });
  }

  double run() override {
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (int k = 0; k < steps(); ++k)
      sum += trainer_->train_batch(batcher_->gather(*data_, order_, first_window(k, batch_, data_->size()), batch_));
    loss_ = sum / steps();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // --profile: one more forward + backward on the first batch, a region per layer and direction,
  // its loss and gradients checked against the same step unprofiled (no optimizer step: weights stay).
  // On a GPU the trainer's regions by CUDA events (bench/profile.h profile_token_step).
  bool profile(ProfileResult& out) override {
    const models::Batch& b = batcher_->gather(*data_, order_, 0, batch_);
    if (device_ != "cpu")
      return profile_token_step(*trainer_, *model_, b, device_,
                                "profile " + s_.c.model + " " + device_ + " batch " + std::to_string(batch_), out);
    // The unprofiled pass through the trainer sets the step number (dropout masks) for both.
    return profile_cpu_step(*model_, [&](models::Profiler* prof) -> double {
      return prof ? models::gradients(*model_, b, prof) : trainer_->gradients(b);
    }, nullptr, out);
  }
  long iterations() const override { return 1; }
  int repetitions() const override { return quick_ ? 2 : 0; }
  // FLOPs: the model's napkin count of a training step (forward + both backwards), for % of peak.
  Work work() const override { return {model_ ? model_->train_flops(batch_) * steps() : 0, 0, double(tokens())}; }
  Metric metric() const override { return Metric::tokens_per_s; }
  void annotate(json& r) const override {
    r["model_params"] = model_->num_params();
    napkin::put(r, napkin::train_step(*model_, batch_), steps());  // FLOPs: forward + both backwards
    const double t = r.value("real_time", 0.0) * 1e-6;
    if (t > 0) r["train_gflops"] = model_->train_flops(batch_) * steps() / t * 1e-9;
    r["steps"] = steps();
    r["mean_loss"] = loss_;
    r["dataset"] = s_.dataset;
    r["trainer"] = trainer_->describe();
  }
  void teardown() override {
    trainer_.reset();
    model_.reset();
  }

 private:
  int steps() const { return (s_.samples + batch_ - 1) / batch_; }
  long long tokens() const { return (long long)steps() * batch_ * s_.c.tokens_per_sample(); }
  Sizes s_;
  std::string device_;
  int batch_;
  bool quick_, graph_;
  std::unique_ptr<models::Model> model_;
  std::shared_ptr<const models::TokenData> data_;
  std::vector<std::uint32_t> order_;
  std::unique_ptr<models::SeqBatcher> batcher_;
  std::unique_ptr<models::Trainer> trainer_;
  double loss_ = NAN;
};

// --- the PyTorch peer ---------------------------------------------------------------------------

std::vector<std::string> peer_args(const Sizes& s, const std::string& device, int batch) {
  const SeqConfig& c = s.c;
  return {"--device", device, "--model", c.model, "--batch", std::to_string(batch), "--samples",
          std::to_string(s.samples), "--vocab", std::to_string(c.vocab), "--seq", std::to_string(c.seq), "--emb",
          std::to_string(c.emb), "--hidden", std::to_string(c.hidden), "--layers", std::to_string(c.layers),
          "--classes", std::to_string(c.classes), "--d-model", std::to_string(c.d_model), "--heads",
          std::to_string(c.heads), "--dropout", std::to_string(c.dropout), "--mask", c.causal ? "causal" : "none"};
}

// The peer trains on our batches: `steps` of them as SeqTrainCase::run gathers them, written to a
// temporary file of little-endian int32 (per step: each token input [n * seq], then the labels);
// the peer reads it with --data (its --steps). Returns the file's path; remove it when done.
std::string write_peer_batches(const Sizes& s, int batch, int steps) {
  static std::atomic<int> serial{0};
  const auto path = std::filesystem::temp_directory_path() /
                    ("dlb-seq-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + ".i32");
  const auto data = windows_for(s, batch);
  std::vector<std::uint32_t> order(data->size());
  std::iota(order.begin(), order.end(), 0u);
  models::SeqBatcher batcher(s.c);
  std::ofstream f(path, std::ios::binary);
  const std::size_t tokens_n = std::size_t(batch) * s.c.seq, labels_n = std::size_t(batch) * s.c.labels_per_sample();
  const int inputs = s.c.model == "transformer" ? 2 : 1;
  for (int k = 0; k < steps; ++k) {
    const models::Batch& b = batcher.gather(*data, order, first_window(k, batch, data->size()), batch);
    for (int i = 0; i < inputs; ++i) f.write(static_cast<const char*>(b.inputs[i]), std::streamsize(tokens_n * 4));
    f.write(reinterpret_cast<const char*>(b.labels), std::streamsize(labels_n * 4));
  }
  if (!f.flush()) throw Unsupported("pytorch peer: cannot write its batches to " + path.string());
  return path.string();
}
void add_data_args(std::vector<std::string>& args, const std::string& path, int steps) {
  for (const std::string& a : {std::string("--data"), path, std::string("--steps"), std::to_string(steps)}) args.push_back(a);
}

// op=infer: one forward per call, timed by the peer itself (manual time: the peer's own seconds).
// op=train goes through the shared PeerCase (add_peer): an epoch per request line, as the lecture's.
class SeqPeerInferCase final : public PeerLatencyCase {
 public:
  SeqPeerInferCase(Sizes s, std::string device, int batch)
      : PeerLatencyCase("infer 1"), s_(std::move(s)), device_(std::move(device)), batch_(batch) {}
  void setup() override {
    std::vector<std::string> args = peer_args(s_, device_, batch_);
    data_file_ = write_peer_batches(s_, batch_, 1);  // the batch ours times (windows 0 .. batch - 1)
    add_data_args(args, data_file_, 1);
    args.push_back("--serve");
    peer_ = std::make_unique<PeerChild>("pytorch_seq.py", args);
  }
  CheckResult verify() override {
    const double t = run();  // one untimed call: the peer runs and answers
    lat_.clear();
    return judge(std::isfinite(t) ? 0.0 : 1.0, 0.5, "peer latency not finite");
  }
  void teardown() override {
    peer_.reset();
    if (!data_file_.empty()) std::filesystem::remove(data_file_);
  }
  Work work() const override { return {0, 0, double(batch_) * s_.c.tokens_per_sample()}; }
  Metric metric() const override { return Metric::tokens_per_s; }

 private:
  Sizes s_;
  std::string device_;
  int batch_;
  std::string data_file_;
};

// --- the axes -> the cases ---------------------------------------------------------------------

Sizes sizes_for(const std::string& model, const SuiteOptions& o, long long seq, long long samples, const std::string& spec) {
  Sizes s;
  s.c = SeqConfig::defaults(model);
  s.c.seq = int(seq), s.c.vocab = int(axis_ints(o, "vocab").at(0));
  s.c.hidden = int(axis_ints(o, "hidden").at(0)), s.c.emb = int(axis_ints(o, "emb").at(0));
  s.c.d_model = int(axis_ints(o, "d_model").at(0)), s.c.heads = int(axis_ints(o, "heads").at(0));
  if (const long long l = axis_ints(o, "layers").at(0); l > 0) s.c.layers = int(l);
  s.c.causal = axis_strings(o, "mask").at(0) == "causal";
  s.samples = int(samples);
  try {
    s.c.check();
    if (model == "rnn" && s.c.layers != 1) throw InputError("rnn: the seed's RNNClassifier has one layer (--layers)");
  } catch (const InputError& e) {
    throw UsageError(e.what());  // a size the flags set: bad usage, exit 2
  }
  if (spec != "synthetic") {
    // The file's windows, enough for the largest batch; its alphabet is the vocabulary unless --vocab
    // was given (then the alphabet must fit in it). InputError (exit 2) for a bad file.
    long long most = samples;
    for (const char* a : {"batch", "infer_batch"})
      for (long long b : axis_ints(o, a)) most = std::max(most, b);
    s.text = std::make_shared<const models::TokenData>(
        models::seq_data(s.c, spec, std::size_t(most), 1, o.was_given("vocab")));
    s.dataset = "text:" + std::filesystem::path(spec.substr(5)).filename().string();
  }
  return s;
}

void add_ids(CaseId& id, const Sizes& s, long long batch) {
  id.with("batch", batch).with("seq", s.c.seq).with("vocab", s.c.vocab);
  if (s.text) id.with("dataset", s.dataset);  // synthetic, the default, is not named (the ids stay as they were)
  if (s.c.model == "transformer")
    id.with("d_model", s.c.d_model).with("heads", s.c.heads).with("layers", s.c.layers).with("mask", s.c.causal ? "causal" : "none");
  else
    id.with("emb", s.c.emb).with("hidden", s.c.hidden).with("layers", s.c.layers);
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const int peer_reps = peer_repetitions(o);  // 0: no --peer
  const bool peer = peer_reps > 0;
  const auto ops = axis_strings(o, "op");
  const long long samples = axis_ints(o, "samples").at(0);
  // --dataset: one spec or several, comma-separated (their cases interleave in one run)
  std::vector<std::string> datasets;
  std::stringstream list(o.extra.value("dataset", "synthetic"));
  for (std::string d; std::getline(list, d, ',');) {
    if (std::find(datasets.begin(), datasets.end(), d) != datasets.end()) throw UsageError("--dataset " + d + ": given twice");
    datasets.push_back(d);
  }
  const bool graph = o.extra.value("cuda_graph", false);
  for (const auto& op : ops) {
    if (op != "train" && op != "infer") throw UsageError("--op " + op + ": expected train or infer");
    const bool train = op == "train";
    for (const auto& model : axis_strings(o, "model")) {
      const bool seq_model = models::is_seq_model(model);
      if (!seq_model && std::find(models::model_names().begin(), models::model_names().end(), model) == models::model_names().end())
        throw UsageError("--model " + model + ": not a model of the zoo");
      if (train && !seq_model) continue;  // the image models train in suite train
      for (long long seq : axis_ints(o, "seq"))
        for (const auto& data : seq_model ? datasets : std::vector<std::string>{"synthetic"}) {
          Sizes s;
          if (seq_model) s = sizes_for(model, o, seq, samples, data);
          for (long long b : axis_ints(o, train ? "batch" : "infer_batch"))
            for (const auto& dev : o.devices) {
              for (const auto& impl : axis_strings(o, "impl")) {
                if (impl != "ours" && impl != "onednn" && impl != "cudnn")
                  throw UsageError("--impl " + impl + ": expected ours, onednn or cudnn");
                // oneDNN's RNN primitives on the CPU, cuDNN's RNN API on a GPU: rnn and lstm only
                if (impl != "ours" && (model != "rnn" && model != "lstm")) continue;
                if (impl == "onednn" && dev != "cpu") continue;
                if (impl == "cudnn" && dev == "cpu") continue;
                CaseId id{"seq", op, dev, "fp32", {{"model", model}, {"impl", impl}}};
                if (seq_model) add_ids(id, s, b);
                else id.with("batch", b);
                Sizes si = s;
                if (seq_model) si.c.impl = models::parse_rnn_impl(impl);
                const bool quick = o.quick;
                if (train) {
                  cases.push_back({id, [=] { return std::make_unique<SeqTrainCase>(si, dev, int(b), quick); }});
                  if (graph && is_gpu(dev) && impl == "ours")  // --cuda-graph: the training step replayed, beside it
                    cases.push_back({CaseId(id).with("cuda_graph", true),
                                     [=] { return std::make_unique<SeqTrainCase>(si, dev, int(b), quick, true); }});
                  continue;
                }
                cases.push_back({id, [=] { return seq::make_infer_case(model, si, dev, int(b), quick, false); }});
                if (graph && dev != "cpu")  // --cuda-graph: the same forward replayed from a CUDA graph, beside it
                  cases.push_back({CaseId(id).with("cuda_graph", true),
                                   [=] { return seq::make_infer_case(model, si, dev, int(b), quick, true); }});
              }
              if (peer && !seq_model) {  // (image models: op=infer only, as ours)
                CaseId id{"seq", op, dev, "fp32", {{"model", model}, {"impl", "pytorch"}}};
                id.with("batch", b);
                cases.push_back({id, [=] { return seq::make_image_peer_infer_case(model, dev, int(b)); }});
              }
              if (peer && seq_model) {
                CaseId id{"seq", op, dev, "fp32", {{"model", model}, {"impl", "pytorch"}}};
                add_ids(id, s, b);
                if (train) {
                  PeerSpec p;
                  p.script = "pytorch_seq.py";
                  p.args = peer_args(s, dev, int(b));
                  p.request = "epoch";
                  const int steps = (s.samples + int(b) - 1) / int(b);
                  p.work = {0, 0, double(steps) * double(b) * s.c.tokens_per_sample()};
                  p.metric = Metric::tokens_per_s;
                  p.keys["dataset"] = s.dataset;
                  auto file = std::make_shared<std::string>();
                  p.prepare = [s, b, steps, file](PeerSpec& ps) {
                    *file = write_peer_batches(s, int(b), steps);
                    add_data_args(ps.args, *file, steps);
                  };
                  p.cleanup = [file] {
                    if (!file->empty()) std::filesystem::remove(*file);
                  };
                  add_peer(cases, id, p, peer_reps);
                } else {
                  cases.push_back({id, [=] { return std::make_unique<SeqPeerInferCase>(s, dev, int(b)); }});
                }
              }
            }
        }
    }
  }
  return cases;
}

// --- the tables after the run --------------------------------------------------------------------

std::string num(double v, const char* f = "%.0f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The training point ours and PyTorch share: device, model and its sizes, batch, dataset ("" off
// training, and for a CUDA-graph row: the peer has none).
std::string train_point(const json& r) {
  if (r.value("op", "") != "train" || r.value("cuda_graph", false)) return "";
  std::string p = r.value("device", "") + "/" + r.value("model", "") + "/" + r.value("dataset", "synthetic");
  for (const char* k : {"batch", "seq", "vocab", "emb", "hidden", "layers", "d_model", "heads", "mask"})
    p += "/" + (r.contains(k) ? r.at(k).dump() : "-");
  return p;
}

// speedup_vs_pytorch on ours' training entries, round by round (bench/paired.h).
void derive(std::vector<json>& entries) {
  derive_paired_speedup(entries, train_point, "ours", "pytorch", "tokens_per_s", "speedup_vs_pytorch");
}

void summarize(const std::vector<json>& records, std::ostream& out) {
  // train: (model, device, batch, seq, dataset) -> impl -> tokens/s; infer: (model, device, batch) -> impl -> record
  using Key = std::tuple<std::string, std::string, long long, long long, std::string>;
  std::map<Key, std::map<std::string, double>> train;
  std::map<Key, std::string> vs_pytorch;  // ours against PyTorch, "median (range)"
  std::map<std::tuple<std::string, std::string, long long>, std::map<std::string, json>> infer;
  for (const auto& r : records) {
    if (r.value("error_occurred", false)) continue;
    const std::string model = r.value("model", ""), impl = r.value("impl", "ours");
    const long long b = r.value("batch", 0LL);
    if (r.value("op", "") == "train" && r.contains("tokens_per_s"))
      train[{model, r.value("device", ""), b, r.value("seq", 0LL), r.value("dataset", "synthetic")}]
           [impl + (r.value("cuda_graph", false) ? "+graph" : "")] = r.at("tokens_per_s").get<double>();
    if (r.contains("speedup_vs_pytorch") && !r.value("cuda_graph", false))
      vs_pytorch[{model, r.value("device", ""), b, r.value("seq", 0LL), r.value("dataset", "synthetic")}] =
          paired_speedup_cell(r, "speedup_vs_pytorch");
    if (r.value("op", "") == "infer" && r.contains("p50_ms"))
      infer[{model, r.value("device", ""), b}][impl + (r.value("cuda_graph", false) ? "+graph" : "")] = r;
  }
  if (!train.empty()) {
    out << "\n### Training throughput (tokens/s), Adam(1e-3), fp32\n\n";
    const bool graphs = std::any_of(train.begin(), train.end(), [](const auto& kv) { return kv.second.count("ours+graph"); });
    std::vector<std::vector<std::string>> rows{{"Model", "Device", "Batchsize", "Seq len", "Dataset",
                                                "Train throughput (tokens/s)", "oneDNN RNN", "cuDNN RNN", "PyTorch",
                                                "ours / PyTorch"}};
    if (graphs) rows[0].insert(rows[0].begin() + 6, "CUDA graph");
    for (const auto& kv : train) {
      const auto& k = kv.first;
      const auto& v = kv.second;  // named, not a structured binding: the lambda captures it (clang)
      auto get = [&](const char* impl) { return v.count(impl) ? num(v.at(impl)) : "-"; };
      rows.push_back({std::get<0>(k), std::get<1>(k) == "cpu" ? "CPU" : "GPU (" + std::get<1>(k) + ")",
                      std::to_string(std::get<2>(k)), std::to_string(std::get<3>(k)), std::get<4>(k), get("ours"), get("onednn"),
                      get("cudnn"), get("pytorch"), vs_pytorch.count(k) ? vs_pytorch.at(k) : "-"});
      if (graphs) rows.back().insert(rows.back().begin() + 6, get("ours+graph"));
    }
    print_markdown(out, rows);
    // The GPU-vs-CPU crossover per model: the smallest batch at which a GPU's tokens/s beats the CPU's (ours).
    std::map<std::string, std::map<std::string, std::map<long long, double>>> by;  // model -> device -> batch
    for (const auto& [k, v] : train)
      if (v.count("ours")) by[std::get<0>(k)][std::get<1>(k)][std::get<2>(k)] = v.at("ours");
    for (const auto& [model, devs] : by)
      for (const auto& [dev, pts] : devs) {
        if (dev == "cpu" || !devs.count("cpu")) continue;
        long long cross = -1;
        for (const auto& [b, tps] : pts)
          if (devs.at("cpu").count(b) && tps > devs.at("cpu").at(b) && cross < 0) cross = b;
        out << "\n" << model << ": " << (cross < 0 ? dev + " does not beat the CPU at any batch measured" : "smallest batch at which " + dev + " beats the CPU: " + std::to_string(cross)) << "\n";
      }
    if (std::none_of(by.begin(), by.end(), [](const auto& m) { return m.second.size() > 1; }))
      out << "\nNo GPU figure in this run: no GPU-vs-CPU crossover to report.\n";
  }
  if (!infer.empty()) {
    out << "\n### Forward-only latency (ms), eval mode\n\n";
    const bool graphs = std::any_of(infer.begin(), infer.end(), [](const auto& kv) {
      return kv.second.count("ours+graph") || kv.second.count("cudnn+graph");
    });
    std::vector<std::vector<std::string>> rows{{"Model", "Device", "Batchsize", "p50", "p99", "oneDNN / cuDNN p50",
                                                "PyTorch p50", "PyTorch p99"}};
    if (graphs) rows[0].insert(rows[0].begin() + 6, {"CUDA graph p50", "cuDNN graph p50"});
    for (const auto& kv : infer) {
      const auto& k = kv.first;
      const auto& v = kv.second;
      auto get = [&](const char* impl, const char* key) { return v.count(impl) ? num(v.at(impl).value(key, 0.0), "%.3f") : "-"; };
      const std::string& dev = std::get<1>(k);
      rows.push_back({std::get<0>(k), dev == "cpu" ? "CPU" : "GPU (" + dev + ")", std::to_string(std::get<2>(k)),
                      get("ours", "p50_ms"), get("ours", "p99_ms"), get(dev == "cpu" ? "onednn" : "cudnn", "p50_ms"),
                      get("pytorch", "p50_ms"), get("pytorch", "p99_ms")});
      if (graphs) rows.back().insert(rows.back().begin() + 6, {get("ours+graph", "p50_ms"), get("cudnn+graph", "p50_ms")});
    }
    print_markdown(out, rows);
  }
}

}  // namespace

DLB_SUITE(seq)
    .about("The seed's sequence models (rnn, lstm, transformer): training tokens/s (op=train; impl ours, onednn (CPU), "
           "cudnn (GPU), --peer pytorch; --dataset synthetic or text:FILE) and forward-only latency p50/p99 of every model on the CPU and a GPU (op=infer)")
    .axis("op", {"train", "infer"})
    .axis("model", {"rnn", "lstm", "transformer", "net128", "mlp", "convnet", "autoencoder"}, {"rnn", "lstm", "transformer", "mlp"})
    .axis("impl", {"ours", "onednn", "cudnn"})
    .axis("batch", {1, 8, 64}, {1, 8})      // op=train
    .axis("infer_batch", {1, 4, 64}, {1, 4})  // op=infer
    .axis("samples", {256}, {16})            // token windows per timed epoch (op=train)
    .axis("seq", {32}, {8})
    .axis("vocab", {128}, {32})
    .axis("emb", {64}, {16})
    .axis("hidden", {128}, {32})
    .axis("d_model", {128}, {32})
    .axis("heads", {4}, {2})
    .axis("layers", {0})  // 0: the seed's (rnn 1, lstm 2, transformer 2 + 2)
    .axis("mask", {"none"})
    .takes({flag::batch(), flag::peer(), flag::profile(), flag::cuda_graph(),
            FlagSpec{"--op", "train, infer or both", "op", true, FlagSpec::Parse::words, 0, {"train", "infer"}},
            FlagSpec{"--model", "models (rnn, lstm, transformer; infer: net128, mlp, convnet, autoencoder)", "model", true,
                     FlagSpec::Parse::words, 0, {"rnn", "lstm", "transformer", "net128", "mlp", "convnet", "autoencoder"}},
            FlagSpec{"--impl", "ours, onednn (rnn, lstm on the CPU), cudnn (rnn, lstm on a GPU)", "impl", true,
                     FlagSpec::Parse::words, 0, {"ours", "onednn", "cudnn"}},
            FlagSpec{"--infer-batch", "op=infer batch sizes", "infer_batch", true, FlagSpec::Parse::ints, 4096},
            FlagSpec{"--samples", "token windows per timed training epoch", "samples", true, FlagSpec::Parse::ints, 1 << 20},
            FlagSpec{"--seq-len", "sequence length", "seq", true, FlagSpec::Parse::ints, models::kMaxSeq},
            FlagSpec{"--vocab", "vocabulary size", "vocab", true, FlagSpec::Parse::ints, models::kMaxVocab},
            FlagSpec{"--hidden", "rnn, lstm hidden size", "hidden", true, FlagSpec::Parse::ints, 8192},
            FlagSpec{"--d-model", "transformer width", "d_model", true, FlagSpec::Parse::ints, 8192},
            FlagSpec{"--heads", "transformer heads", "heads", true, FlagSpec::Parse::ints, 256},
            FlagSpec{"--layers", "recurrent layers; transformer encoder and decoder layers each", "layers", true,
                     FlagSpec::Parse::ints, 64},
            FlagSpec{"--mask", "transformer decoder self-attention mask", "mask", true, FlagSpec::Parse::word, 0, {"none", "causal"}},
            FlagSpec{"--dataset", "synthetic (default) or text:FILE, character-level windows of a UTF-8 text file "
                     "(several, comma-separated, interleave)",
                     "dataset", false, FlagSpec::Parse::text, 0, {}}})
    .cases(expand)
    .derived(derive)
    .summary(summarize);

}  // namespace dlb::bench
