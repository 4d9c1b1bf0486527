// Suite "gpt2": GPT-2 training steps (models/gpt2.h: forward, backward, AdamW) on llm.c's configs,
// ours (impl=ours: our fused causal attention, LayerNorm, GELU, the tied head, fp32; CPU and GPU)
// against the PyTorch peer (impl=pytorch: bench/peers/pytorch_gpt2.py, eager or torch.compile, CPU or GPU,
// on the same weights and tokens written as llm.c files). Seeded GPT-2 init and random tokens.
// Work: the napkin FLOPs of a step (6 N per token + causal attention, gpt2_flops_per_token), so
// pct_of_peak is the MFU against the measured fp32 FMA peak (CPU) or the GPU's fp32 peak; tokens/s
// is derived from the same time. Names: gpt2/train/<device>/fp32/config=<c>/impl=<i>/batch=<B>/seq=<T>.
// Ours is verified before timing: the fp32 loss of one sequence against the model's fp64 reference;
// the peer: its loss is finite (its numbers are PyTorch's; the parity is tests/test_gpt2_peer.cpp's).
// --dtype fp32,tf32,bf16,fp16 (axis dtype; ours on a GPU): the trainer's GEMMs autocast to tf32 /
// bf16 / fp16 (fp32 buffers, the rest fp32; fp16 with the device-side loss scaler, its gradients
// unscaled before the check, `loss_scale` recorded), verified against the CPU fp32 step by relative
// L2 per tensor within kernels/common/autocast_tolerance.h's, MFU (pct_of_peak) against the dtype's
// dense tensor-core peak (the harness's harness/gpu_peaks.h, by the record's dtype). On the CPU ours
// runs fp32 and bf16: the AmpTrainer step (PyTorch's autocast policy; bf16 GEMMs where the CPU has
// avx512_bf16, recorded as bf16_compute), verified against the fp32 step the same way, MFU against
// twice the fp32 FMA peak (vdpbf16ps); tf32 / fp16 are skipped there with the reason. The peers'
// other dtypes are not made, but for PyTorch's bf16 AMP (pytorch_gpt2.py --autocast bf16:
// torch.autocast around the forward, matmuls and SDPA in bf16; CPU and GPU), made beside ours' bf16
// rows; its loss must be finite, as the fp32 peer's.
// Ours on a GPU trains in the CUDA sequence trainer (models/cuda/gpu_seq_trainer.h: cuBLAS fp32 GEMMs,
// our fused causal attention forward and backward, LayerNorm, GELU, classifier, AdamW), verified as
// the seq suite verifies its GPU rows but against the CPU fp32 step from the same weights (the first
// batch's loss and every gradient), timed per step (train_batch waits for the device); its records
// carry model_device_bytes and peak_device_bytes (first run on an H100, 2026-11-27). --checkpoint-activations on the GPU: the trainer recomputes each block in backward (peak
// device memory recorded).
// impl=llmc: llm.c's own plain-C CPU trainer (bench/peers/llmc_gpt2.py, the checkout in
// DLBENCH_LLMC_DIR built by its Makefile) on the same files, at the one point its main() fixes (CPU,
// B=4, T=64); verified by its step-0 val loss against our forward on the same 5 batches.
// --attn flash,unfused (axis attn, ours only; names gain attn=unfused): the attention core fused
// (online softmax, no T x T matrix) or unfused (GEMMs + softmax, P kept for backward), CPU and GPU.
// --checkpoint-activations off,on (axis ckpt): ours recomputes each block in backward (models/gpt2.h);
// its records carry activation_bytes (the executor's values and gradients) beside the harness's peak RSS.
// op=infer (--op infer): batch 1 with a K/V cache (models/gpt2_decode.h), phase=prefill (the seq-token
// prompt in one pass, tokens/s) and phase=decode (one token per call at contexts seq .. seq + 63,
// p50/p99 ms per token), ours against the peer's own cache (eval, no_grad). Ours verified first: every
// prefilled and decoded position's logits against the full forward's; the peer checks its cache the
// same way against its own full forward. On a GPU ours is the device decoder
// (models/cuda/gpu_gpt2_decode.cu); a timed call is the token upload and the
// forward up to the logits on the device, synchronized (the peer's: the same, torch.cuda.synchronize). Names: gpt2/infer/<device>/fp32/config/impl/phase/seq.
// --profile records one step of ours layer by layer (bench/profile.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/gpt2_tables.h"
#include "bench/graph_check.h"
#include "bench/latency.h"
#include "bench/peer.h"
#include "bench/suite.h"
#include "bench/training_cases.h"
#include "kernels/common/autocast_tolerance.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_gemm.h"
#include "models/amp.h"
#include "models/gpt2.h"
#include "models/gpt2_decode.h"
#include "models/layers.h"
#include "models/net.h"
#include "models/trainer.h"

namespace dlb::bench {

namespace {

namespace fs = std::filesystem;
using models::Gpt2Config;

struct Point {
  std::string config;
  int B, T;
  bool ckpt = false;           // --checkpoint-activations
  std::string attn = "flash";  // ours' attention core (--attn): flash (fused) or unfused (P materialized)
  DType dtype = DType::fp32;   // ours on a GPU (--dtype): fp32, or its GEMMs autocast to tf32 / bf16 / fp16
};

// GPT-2 at point p, its attention cores running p.attn (CPU and GPU: the GPU twin follows the host
// layer's choice).
std::unique_ptr<models::Model> make_model(const Gpt2Config& c, const Point& p) {
  auto m = models::make_gpt2(models::gpt2_random_weights(c, 1), p.T);
  for (const models::Node& n : m->nodes())
    if (n.layer->op() == models::Op::multihead_attention) static_cast<models::MultiheadAttention&>(*n.layer).algo = p.attn;
  m->set_checkpointing(p.ckpt);  // each block recomputed in backward (CPU executor and GPU trainer)
  return m;
}

// Decode steps per prefilled prompt (op=infer): the cache then holds seq + kDecodeSteps positions.
constexpr int kDecodeSteps = 64;

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

// A step's loss `got` and gradients (the model's Param::grad now) against the CPU fp32 step of the
// same model on the same batch, run here (it leaves the fp32 step's gradients behind): fp32 the
// largest element error per tensor; an autocast dtype each error over its tolerance (the loss's;
// relative L2 per gradient tensor: kernels/common/autocast_tolerance.h), to be judged against 1.
WorstError against_fp32_step(models::Model& m, const models::Batch& b, double got, DType t) {
  std::vector<std::vector<float>> grads;
  for (models::Param* q : m.params()) grads.push_back(q->grad);
  m.zero_grad();
  const double want = m.forward_backward(b);
  const bool amp = t != DType::fp32;
  const StepTolerance tol = autocast_step_tolerance(t);
  WorstError w;
  w.add(std::abs(got - want) / std::max(1e-12, std::abs(want)) / (amp ? tol.loss : 1.0), "the loss");
  const auto ps = m.params();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    L2Error l2;
    if (amp) l2.add(grads[i].data(), ps[i]->grad.data(), ps[i]->size());
    w.add(amp ? l2.rel() / tol.grad_l2 : max_rel_err(grads[i].data(), ps[i]->grad.data(), ps[i]->size()),
          ps[i]->name + "'s gradient");
  }
  return w;
}

// What ours' training cases share, CPU and GPU: the point, a step's FLOPs, the keys of its records.
class OursTrainCase : public Case {
 public:
  explicit OursTrainCase(Point p) : p_(std::move(p)) {}
  Work work() const override { return {step_flops(p_), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_point(r, p_, 1);
    r["attn"] = p_.attn;
    r["loss"] = loss_;
  }

 protected:
  Point p_;
  double loss_ = NAN;
};

// Ours: one AdamW step per iteration on the next batch of the token stream. --dtype bf16: the step
// under autocast (models/amp.h AmpTrainer: PyTorch's policy, as the peer's torch.autocast runs it:
// every Linear and the tied LM head on bf16 operands with fp32 sums, the rest fp32, fp32 masters and
// AdamW); where the CPU computes bf16 (avx512_bf16 and oneDNN: models::bf16_compute_native) our bf16
// GEMMs, elsewhere emulated (fp32 kernels on bf16-rounded values: bf16's numbers at fp32's speed),
// recorded as bf16_compute.
class OursCase final : public OursTrainCase {
 public:
  explicit OursCase(Point p) : OursTrainCase(std::move(p)) {}
  void setup() override {
    const Gpt2Config c = config_of(p_);
    try {
      model_ = make_model(c, p_);
      drop_reference();
      opt_ = std::make_unique<models::Optimizer>(models::gpt2_optimizer(), model_->params());
      if (amp()) amp_ = std::make_unique<models::AmpTrainer>(*model_, *opt_, p_.dtype);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("gpt2 " + p_.config);
    }
    batches_ = std::make_unique<models::Gpt2Batcher>(models::gpt2_random_tokens(std::size_t(8) * p_.B * p_.T + 1, c.vocab_size, 2),
                                                     p_.B, p_.T);
  }
  CheckResult verify() override { return amp() ? verify_amp() : verify_fp32(); }
  double run() override {
    loss_ = gradients(batches_->next());
    opt_->step();
    act_bytes_ = amp_ ? amp_->activation_bytes() : model_->activation_bytes();
    return 0;
  }
  // --profile: one more step on the next batch, region by region (each layer's forward and backward,
  // the loss, zero_grad, AdamW), its loss and gradients checked against an unprofiled step's.
  bool profile(ProfileResult& out) override {
    const models::Batch& b = batches_->next();
    return profile_cpu_step(*model_, [&](models::Profiler* prof) { return gradients(b, prof); }, [&] { opt_->step(); }, out);
  }
  void annotate(json& r) const override {
    OursTrainCase::annotate(r);
    r["activation_bytes"] = act_bytes_;
    if (!amp()) return;
    const bool native = models::bf16_compute_native();
    r["autocast"] = "pytorch policy: Linear and the LM head on bf16 operands, fp32 sums; the rest fp32";
    r["bf16_compute"] = native ? "native" : "emulated";
    r["bf16_path"] = native ? cpu::bf16_gemm_path() : "bf16-rounded operands and outputs, fp32 kernels";
  }
  void teardown() override { amp_.reset(), opt_.reset(), model_.reset(), batches_.reset(); }

 private:
  bool amp() const { return p_.dtype != DType::fp32; }
  // Zero-grad, forward, loss, backward on b (fp32, or under autocast); the gradients in Param::grad.
  double gradients(const models::Batch& b, models::Profiler* prof = nullptr) {
    return amp_ ? amp_->gradients(b, prof) : models::gradients(*model_, b, prof);
  }
  CheckResult verify_fp32() {
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
  CheckResult verify_amp() {
    // The first timed batch, whole: the autocast step's loss and each gradient tensor's relative L2
    // error against the fp32 step's from the same weights, within autocast_step_tolerance's (bf16's
    // 8-bit mantissa; the napkin math in kernels/common/autocast_tolerance.h), as the GPU rows are.
    // The fp32 step is the one the fp32 row verifies against fp64.
    const models::Batch& b = batches_->next();
    const double got = amp_->gradients(b);
    const WorstError w = against_fp32_step(*model_, b, got, p_.dtype);
    batches_->rewind();
    model_->zero_grad();
    return judge(w.err, 1.0, "gpt2 " + std::string(dtype_name(p_.dtype)) + " autocast step: loss and gradients vs the fp32 step" +
                                 w.said() + ": error / tolerance");
  }
  // The fp64 copies every Param holds (2 GB at gpt2-124m): only verify's forward reads them (and
  // fills them first). Dropped, the case stays under the harness's 4 GB interleaving window.
  void drop_reference() {
    for (models::Param* q : model_->params()) q->ref_value = {}, q->ref_grad = {};
  }
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Optimizer> opt_;
  std::unique_ptr<models::AmpTrainer> amp_;
  std::unique_ptr<models::Gpt2Batcher> batches_;
  std::size_t act_bytes_ = 0;
};

// Ours on a GPU: one AdamW step per iteration in the CUDA sequence trainer, fp32 or GEMM autocast (--dtype);
// graph (--cuda-graph, fp32 / tf32): each step replayed from a CUDA graph (TrainOptions::cuda_graph).
class OursGpuCase final : public OursTrainCase {
 public:
  OursGpuCase(Point p, std::string device, bool graph = false)
      : OursTrainCase(std::move(p)), device_(std::move(device)), graph_(graph) {}
  void setup() override {
    const Gpt2Config c = config_of(p_);
    try {
      model_ = make_model(c, p_);
      for (models::Param* q : model_->params()) q->ref_value = {}, q->ref_grad = {};  // fp64 copies: unused
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("gpt2 " + p_.config);
    }
    models::TrainOptions o;
    o.device = device_, o.dtype = p_.dtype, o.cuda_graph = graph_;
    try {
      trainer_ = models::make_trainer(*model_, models::gpt2_optimizer(), o);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const std::exception& e) {
      throw Unsupported(std::string("the GPU trainer refuses gpt2: ") + e.what());
    }
    batches_ = std::make_unique<models::Gpt2Batcher>(models::gpt2_random_tokens(std::size_t(8) * p_.B * p_.T + 1, c.vocab_size, 2),
                                                     p_.B, p_.T);
  }
  CheckResult verify() override {
    // The first timed batch, whole (the batch layout counts; no second device plan, so the peak
    // device bytes stay the step's own): the GPU step's loss and every gradient against the CPU fp32
    // step from the same weights (the trainer has not stepped yet). Both fp32, summed in other orders
    // (cuBLAS's tiling, block trees, the flash kernel's online softmax against OpenBLAS and the
    // CPU's): ~1e-6 of each tensor's scale; kGpuTolerance leaves room, while a wrong or lost term is
    // off by 1e-2 and more. The CPU step costs what one CPU case's step does (0.8 TFLOP at
    // gpt2-124m B 4 T 256).
    // tf32 / bf16 / fp16 (the GEMMs' operands rounded, fp32 accumulation): the loss and each
    // gradient tensor's relative L2 error within kernels/common/autocast_tolerance.h's (napkin math
    // there: tf32 10-bit truncated, bf16 7-bit, fp16 10-bit rounded mantissas; per tensor as L2,
    // since a GEMM sum that cancels carries its terms' rounding). fp16's gradients() come back
    // unscaled; an overflow at the scaler's 2^16 would show here as inf/NaN gradients (a failure).
    const models::Batch& b = batches_->next();
    const float got = trainer_->gradients(b);
    const bool amp = p_.dtype != DType::fp32;
    const WorstError w = against_fp32_step(*model_, b, got, p_.dtype);  // the first run on a GPU says which tensor is off
    batches_->rewind();
    model_->zero_grad();
    const std::string what = "gpt2 GPU step: loss and gradients vs the CPU fp32 step" + w.said();
    CheckResult r = amp ? judge(w.err, 1.0, what + ", " + dtype_name(p_.dtype) + ": error / tolerance")
                        : judge(w.err, kGpuTolerance, what);
    if (graph_ && r.ok) r = verify_graph_steps();  // (tf32's graph rows too)
    return r;
  }
  // --cuda-graph: 3 steps from the graph against an eager twin (bench/graph_check.h; a second copy of
  // the weights, gradients and AdamW state on the device for the check: ~2 GB at gpt2-124m).
  CheckResult verify_graph_steps() {
    auto twin = make_model(config_of(p_), p_);
    twin->copy_params_from(*model_);
    models::TrainOptions o;
    o.device = device_, o.dtype = p_.dtype;
    auto eager = models::make_trainer(*twin, models::gpt2_optimizer(), o);
    const CheckResult r = check_graph_steps(*trainer_, *model_, *eager, *twin, 3,
                                            [&](int) -> const models::Batch& { return batches_->next(); });
    batches_->rewind();
    return r;
  }

  double run() override {
    loss_ = trainer_->train_batch(batches_->next());  // waits for the device: the harness's wall time is the step's
    return 0;
  }
  // --profile: one more forward + backward (no AdamW step) on the next batch, a region per layer by
  // CUDA events, checked against the same batch unprofiled (bench/profile.h profile_token_step).
  bool profile(ProfileResult& out) override {
    const models::Batch& b = batches_->next();
    return profile_token_step(*trainer_, *model_, b, device_, "profile gpt2 " + p_.config + " " + device_, out);
  }
  void annotate(json& r) const override {
    OursTrainCase::annotate(r);
    r["trainer"] = trainer_->describe();  // names the cuBLAS compute type under autocast
    if (p_.dtype != DType::fp32) r["autocast"] = "gemm operands";  // storage and the other ops stay fp32
    if (p_.dtype == DType::fp16) r["loss_scale"] = trainer_->loss_scale();  // below 2^16: steps were skipped
    r["model_device_bytes"] = trainer_->model_device_bytes();
    r["peak_device_bytes"] = trainer_->peak_device_bytes();
  }
  void teardown() override { trainer_.reset(), model_.reset(), batches_.reset(); }

 private:
  // As the seq suite's GPU rows (its kSeqTolerance), the same measure (max_rel_err per tensor).
  static constexpr double kGpuTolerance = 1e-4;
  std::string device_;
  bool graph_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Trainer> trainer_;
  std::unique_ptr<models::Gpt2Batcher> batches_;
};

// A point an implementation cannot run: recorded as skipped with the reason.
class SkipCase final : public Case {
 public:
  explicit SkipCase(std::string why) : why_(std::move(why)) {}
  void setup() override { throw Unsupported(why_); }
  CheckResult verify() override { return {}; }
  double run() override { return 0; }
  Work work() const override { return {}; }
  Metric metric() const override { return Metric::gflops; }

 private:
  std::string why_;
};

constexpr const char* kNoCpuAutocast =
    "gpt2 impl=ours on the CPU trains in fp32 and bf16 (--dtype tf32, fp16: the GPU trainer's autocast of the GEMMs)";

// op=infer: the prompt (seq tokens) and the tokens decoded after it, at batch 1.
struct InferPoint {
  std::string config, phase;  // phase: prefill or decode
  int T;
  int len() const { return std::min(T + kDecodeSteps, models::gpt2_config(config).max_seq_len); }
  // Unsupported when the config's positions hold no such prompt (decode: and a token after it).
  void check_room() const {
    const int max = models::gpt2_config(config).max_seq_len;
    if (T > max || (phase == "decode" && T >= max))
      throw Unsupported(config + ": no room for seq " + std::to_string(T) + " in " + std::to_string(max) + " positions");
  }
  // A repetition: one call (prefill, T tokens) or kDecodeSteps calls of one token (p99 over many).
  long iterations() const { return phase == "decode" ? kDecodeSteps : 0; }
  Work work() const { return {0, 0, phase == "prefill" ? double(T) : 1.0}; }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Ours: prefill = the whole prompt into an empty cache per call; decode = one token per call (the
// cache refilled with the prompt, untimed, when it is full). CPU or GPU (make_gpt2_decoder).
class OursInferCase final : public Case {
 public:
  OursInferCase(InferPoint p, std::string device) : p_(std::move(p)), device_(std::move(device)) {}
  void setup() override {
    const Gpt2Config c = models::gpt2_config(p_.config);
    p_.check_room();
    try {
      model_ = models::make_gpt2(models::gpt2_random_weights(c, 1), p_.len());
      dec_ = models::make_gpt2_decoder(*model_, c, p_.len(), device_);
      cache_bytes_ = dec_->cache_bytes();
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("gpt2 " + p_.config);
    }
    for (std::uint16_t t : models::gpt2_random_tokens(std::size_t(p_.len()), c.vocab_size, 3)) tokens_.push_back(t);
  }
  CheckResult verify() override {
    // Every position's logits, prefilled then decoded one by one, against the full forward's.
    std::vector<std::int32_t> labels(tokens_.size(), 0);
    const void* in[1] = {tokens_.data()};
    models::Batch b;
    b.n = 1, b.labels = labels.data(), b.inputs = in;
    const std::vector<float> want = model_->predict(b);
    const std::size_t V = std::size_t(models::gpt2_config(p_.config).vocab_size);
    double err = 0, scale = 1e-12;
    auto compare = [&](const std::vector<float>& got, int from) {
      for (std::size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::abs(got[i] - want[std::size_t(from) * V + i])));
    };
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    dec_->reset();
    dec_->feed(tokens_.data(), p_.T, true);
    compare(dec_->logits(), 0);
    for (int t = p_.T; t < p_.len(); ++t) dec_->feed(&tokens_[std::size_t(t)], 1, false), compare(dec_->logits(), t);
    dec_->reset();
    return judge(err / scale, 1e-4, "gpt2 K/V-cache logits vs the full forward (max |diff| / max |logit|)");
  }
  double run() override {
    if (p_.phase == "prefill") dec_->reset();
    else if (dec_->position() == 0 || dec_->position() >= p_.len()) dec_->reset(), dec_->feed(tokens_.data(), p_.T, false);
    const int at = dec_->position(), n = p_.phase == "prefill" ? p_.T : 1;
    const auto t0 = std::chrono::steady_clock::now();
    dec_->feed(&tokens_[std::size_t(at)], n, false);
    lat_.push_back(seconds_since(t0));
    return lat_.back();
  }
  bool manual_time() const override { return true; }  // each call's own time (decode: not the refill)
  long iterations() const override { return p_.iterations(); }
  Work work() const override { return p_.work(); }
  Metric metric() const override { return Metric::tokens_per_s; }
  void annotate(json& r) const override {
    put_latency(r, lat_);
    r["cache_bytes"] = cache_bytes_;
    r["context"] = p_.phase == "prefill" ? std::to_string(p_.T) : std::to_string(p_.T) + ".." + std::to_string(p_.len() - 1);
  }
  void teardown() override { dec_.reset(), model_.reset(); }

 private:
  InferPoint p_;
  std::string device_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::KvDecoder> dec_;
  std::vector<std::int32_t> tokens_;
  std::vector<double> lat_;
  std::size_t cache_bytes_ = 0;
};

// The peer's op=infer: one call per request, timed by the peer (its own perf_counter around it);
// it checks its cache against its own full forward before answering ready.
class PeerInferCase final : public PeerLatencyCase {
 public:
  PeerInferCase(InferPoint p, std::string device, fs::path dir)
      : PeerLatencyCase("infer"), p_(std::move(p)), device_(std::move(device)), dir_(std::move(dir)) {}
  void setup() override;
  CheckResult verify() override {
    const double rel = peer_->ready.value("kv_check_rel", 1.0);
    const double t = run();  // one untimed call: the peer runs and answers
    lat_.clear();
    if (!std::isfinite(t)) return judge(1.0, 0.5, "peer latency not finite");
    return judge(rel, 1e-4, "the peer's K/V-cache logits vs its full forward (max |diff| / max |logit|)");
  }
  void teardown() override {
    peer_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  long iterations() const override { return p_.iterations(); }
  Work work() const override { return p_.work(); }
  Metric metric() const override { return Metric::tokens_per_s; }

 private:
  InferPoint p_;
  std::string device_;
  fs::path dir_;
};

// The peer's files: the same seeded weights and tokens as ours, written per case (removed after it).
void write_peer_files(const Point& p, const fs::path& dir) {
  const Gpt2Config c = config_of(p);
  fs::create_directories(dir);
  if (!fs::exists(dir / "model.bin")) models::write_gpt2_checkpoint((dir / "model.bin").string(), models::gpt2_random_weights(c, 1));
  models::write_gpt2_tokens((dir / "tokens.bin").string(),
                            models::gpt2_random_tokens(std::size_t(p.B) * p.T + 1, c.vocab_size, 2));
}

void PeerInferCase::setup() {
  const Gpt2Config c = models::gpt2_config(p_.config);
  p_.check_room();
  fs::create_directories(dir_);
  models::write_gpt2_checkpoint((dir_ / "model.bin").string(), models::gpt2_random_weights(c, 1));
  models::write_gpt2_tokens((dir_ / "tokens.bin").string(), models::gpt2_random_tokens(std::size_t(p_.len()), c.vocab_size, 3));
  peer_ = std::make_unique<PeerChild>(
      "pytorch_gpt2.py", std::vector<std::string>{"--checkpoint", (dir_ / "model.bin").string(), "--tokens",
                                                  (dir_ / "tokens.bin").string(), "--seq", std::to_string(p_.T), "--device",
                                                  device_, "--infer", p_.phase, "--decode-steps",
                                                  std::to_string(p_.len() - p_.T), "--serve"});
}

// The peer's cases before ours at each point: the harness sets up a window's cases in sweep order
// and adds none once our process has grown past its memory bound (ours holds 2.6 GB at gpt2-124m);
// the peer's memory is its own process's, so with it first both are timed in one interleaved window.
std::vector<std::string> peer_first(std::vector<std::string> impls) {
  std::stable_partition(impls.begin(), impls.end(), [](const std::string& i) { return i != "ours"; });
  return impls;
}

fs::path peer_dir(const std::string& what) {
  return fs::temp_directory_path() / ("dlb-gpt2-" + std::to_string(::getpid()) + "-" + what);
}

void add_infer_cases(std::vector<CaseSpec>& cases, const SuiteOptions& o, const std::string& config, const std::string& dev) {
  for (long long T : axis_ints(o, "seq"))
    for (const std::string phase : {"prefill", "decode"})
      for (const auto& impl : peer_first(axis_strings(o, "impl"))) {
        const InferPoint p{config, phase, int(T)};
        CaseId id{"gpt2", "infer", dev, "fp32", {}};
        id.with("config", config).with("impl", impl).with("phase", phase).with("seq", T);
        if (impl == "ours") {
          cases.push_back({id, [p, dev] { return std::make_unique<OursInferCase>(p, dev); }});
          continue;
        }
        if (impl == "llmc") {
          cases.push_back({id, [] { return std::make_unique<SkipCase>("llm.c's train_gpt2.c has no batch-1 K/V-cache inference"); }});
          continue;
        }
        if (impl != "pytorch") throw UsageError("gpt2: impl '" + impl + "' (expected ours, pytorch or llmc)");
        const fs::path dir = peer_dir(config + "-infer-" + phase + "-" + std::to_string(T));
        const std::string device = dev == "cpu" ? "cpu" : dev;
        cases.push_back({id, [p, device, dir] { return std::make_unique<PeerInferCase>(p, device, dir); }});
      }
}

// llm.c's val loss: main() averages the loss of kLlmcValBatches consecutive, unshuffled B x T batches
// of the val file at steps 0, 10, ...; batch k reads tokens [k B T, (k + 1) B T] (the loader's
// B T + 1 window), so 5 B T + 1 tokens are exactly what step 0 reads (fewer wrap around).
constexpr int kLlmcValBatches = 5;
// Our loss over those batches against llm.c's printed one (%f: 6 decimals, 5e-7 of ~11 = 5e-8).
// Both fp32 over the same weights; summation orders differ (llm.c: -Ofast, OpenMP; ours: blocked
// GEMMs, online softmax): measured 9e-9 (gpt-mini) and 1.2e-7 (gpt2-124m) apart. 1e-5 leaves 80x,
// while another batch, a wrong layer, mask or position moves a random-init loss by 1e-3 and more.
constexpr double kLlmcValTol = 1e-5;

// A peer that reads the point's weights and tokens needs a checkout: $DLBENCH_LLMC_DIR with
// train_gpt2.c and its Makefile (checked before any file is written; the peer checks again).
void require_llmc_checkout() {
  const char* d = std::getenv("DLBENCH_LLMC_DIR");
  if (!d || !*d) throw Unsupported("llm.c peer: DLBENCH_LLMC_DIR is not set (a checkout of github.com/karpathy/llm.c; docs/peers.md)");
  const fs::path dir(d);
  std::error_code ec;
  if (!fs::is_regular_file(dir / "train_gpt2.c", ec) || !fs::is_regular_file(dir / "Makefile", ec))
    throw Unsupported(std::string("llm.c peer: DLBENCH_LLMC_DIR=") + d + " has no train_gpt2.c and Makefile (not an llm.c checkout)");
}

// Ours on llm.c's step-0 val batches: the mean of the batches' mean losses, as main() prints it.
double our_val_loss(const fs::path& dir, int B, int T) {
  const models::Gpt2Weights w = models::read_gpt2_checkpoint((dir / "model.bin").string());
  auto m = models::make_gpt2(w, T);
  for (models::Param* q : m->params()) q->ref_value = {}, q->ref_grad = {};  // fp64 copies: unused here
  models::Gpt2Batcher val(models::read_gpt2_tokens((dir / "val.bin").string(), w.config.vocab_size), B, T);
  double sum = 0;
  for (int k = 0; k < kLlmcValBatches; ++k) {
    m->zero_grad();
    sum += m->forward_backward(val.next());
  }
  return sum / kLlmcValBatches;
}

// impl=llmc at one point: a skip where train_gpt2.c cannot run it, else the peer with its files
// (the seeded weights and training tokens ours trains on, and the val batches) and its check.
void add_llmc(std::vector<CaseSpec>& cases, const CaseId& id, const Point& p, const std::string& dev, int reps) {
  auto skip = [&](const char* why) { cases.push_back({id, [why] { return std::make_unique<SkipCase>(why); }}); };
  if (is_gpu(dev)) return skip("llm.c's train_gpt2.c runs on the CPU (its CUDA trainer is another program)");
  if (p.B != 4 || p.T != 64) return skip("llm.c's train_gpt2.c fixes B=4, T=64");
  if (p.ckpt) return skip("llm.c's train_gpt2.c has no activation checkpointing");
  const fs::path dir = peer_dir(p.config + "-llmc");
  PeerSpec s;
  s.script = "llmc_gpt2.py";
  s.runner = {"llmc", false};
  s.args = {"--checkpoint", (dir / "model.bin").string(), "--train-tokens", (dir / "train.bin").string(), "--val-tokens",
            (dir / "val.bin").string(), "--run-dir", (dir / "run").string(), "--val-loss-file", (dir / "val_loss.json").string()};
  s.request = "steps";
  s.work = {step_flops(p), 0, 0};
  s.metric = Metric::gflops;
  annotate_point(s.keys, p, 1);
  s.keys["val_batches"] = kLlmcValBatches;
  s.prepare = [p, dir](PeerSpec&) {
    require_llmc_checkout();
    const Gpt2Config c = config_of(p);
    fs::create_directories(dir);
    models::write_gpt2_checkpoint((dir / "model.bin").string(), models::gpt2_random_weights(c, 1));
    const std::size_t bt = std::size_t(p.B) * p.T;
    models::write_gpt2_tokens((dir / "train.bin").string(), models::gpt2_random_tokens(8 * bt + 1, c.vocab_size, 2));
    models::write_gpt2_tokens((dir / "val.bin").string(), models::gpt2_random_tokens(kLlmcValBatches * bt + 1, c.vocab_size, 3));
  };
  s.check = [p, dir] {
    std::ifstream in(dir / "val_loss.json");
    const json j = json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("val_loss") || !j.at("val_loss").is_number())
      return judge(1.0, kLlmcValTol, "llm.c wrote no step-0 val loss");
    const double theirs = j.at("val_loss").get<double>(), ours = our_val_loss(dir, p.B, p.T);
    return judge(std::abs(theirs - ours) / std::abs(ours), kLlmcValTol,
                 "llm.c's step-0 val loss vs ours on the same " + std::to_string(kLlmcValBatches) + " batches and weights");
  };
  s.cleanup = [dir] {
    std::error_code ec;
    fs::remove_all(dir, ec);
  };
  add_peer(cases, id, s, reps);
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const auto modes = axis_strings(o, "peer_mode");
  const auto ops = axis_strings(o, "op");
  std::vector<DType> dtypes;
  for (const auto& d : axis_strings(o, "dtype")) dtypes.push_back(parse_dtype(d));
  const bool fp32 = std::find(dtypes.begin(), dtypes.end(), DType::fp32) != dtypes.end();
  const bool graph = o.extra.value("cuda_graph", false);
  for (const auto& config : axis_strings(o, "config")) {
    models::gpt2_config(config);  // a bad name is bad usage, before any case runs
    for (const auto& dev : o.devices) {
      if (std::find(ops.begin(), ops.end(), "infer") != ops.end()) add_infer_cases(cases, o, config, dev);
      if (std::find(ops.begin(), ops.end(), "train") == ops.end()) continue;
      for (long long B : axis_ints(o, "batch"))
        for (long long T : axis_ints(o, "seq"))
          for (const auto& ckpt : axis_strings(o, "ckpt"))
            for (const auto& impl : peer_first(axis_strings(o, "impl"))) {
              const Point p{config, int(B), int(T), ckpt == "on"};
              auto id = [&](const std::string& i, DType t = DType::fp32) {
                CaseId c{"gpt2", "train", dev, dtype_name(t), {}};
                c.with("config", config).with("impl", i).with("batch", B).with("seq", T);
                if (p.ckpt) c.with("ckpt", "on");  // the names of the plain step stay as they were
                return c;
              };
              if (impl == "ours") {
                for (const auto& attn : axis_strings(o, "attn"))
                  for (const DType t : dtypes) {
                    Point q = p;
                    q.attn = attn, q.dtype = t;
                    CaseId c = id("ours", t);
                    if (attn != "flash") c.with("attn", attn);  // the names of the fused step stay as they were
                    if (!is_gpu(dev) && !models::dtype_supported(t, false))
                      cases.push_back({c, [] { return std::make_unique<SkipCase>(kNoCpuAutocast); }});
                    else if (!is_gpu(dev)) cases.push_back({c, [q] { return std::make_unique<OursCase>(q); }});
                    else cases.push_back({c, [q, dev] { return std::make_unique<OursGpuCase>(q, dev); }});
                    // --cuda-graph: the step replayed, beside it (fp32 / tf32: the 16-bit GEMMs' operand
                    // copies grow with the shapes, which a captured graph cannot follow)
                    if (graph && is_gpu(dev) && (t == DType::fp32 || t == DType::tf32))
                      cases.push_back({CaseId(c).with("cuda_graph", true),
                                       [q, dev] { return std::make_unique<OursGpuCase>(q, dev, true); }});
                  }
                continue;
              }
              // The peers run fp32; PyTorch also bf16 AMP (torch.autocast: matmuls and SDPA in bf16, on
              // the CPU and the GPU) beside ours' bf16 rows, what a user's mixed-precision loop runs.
              std::vector<DType> peer_dtypes;
              if (fp32) peer_dtypes.push_back(DType::fp32);
              if (impl == "pytorch" && std::find(dtypes.begin(), dtypes.end(), DType::bf16) != dtypes.end())
                peer_dtypes.push_back(DType::bf16);
              if (peer_dtypes.empty()) continue;
              if (impl == "llmc") {
                add_llmc(cases, id("llmc"), p, dev, o.repetitions > 0 ? o.repetitions : 5);
                continue;
              }
              if (impl != "pytorch") throw UsageError("gpt2: impl '" + impl + "' (expected ours, pytorch or llmc)");
              const int steps = is_gpu(dev) ? 10 : 1;
              for (const auto& mode : modes)
                for (const DType t : peer_dtypes) {
                  const bool amp = t == DType::bf16;
                  const fs::path dir = peer_dir(config + "-" + std::to_string(B) + "x" + std::to_string(T) +
                                                (p.ckpt ? "-ckpt" : "") + (amp ? "-bf16" : ""));
                  PeerSpec s;
                  s.script = "pytorch_gpt2.py";
                  s.args = {"--checkpoint", (dir / "model.bin").string(), "--tokens", (dir / "tokens.bin").string(),
                            "--batch", std::to_string(B), "--seq", std::to_string(T), "--device", dev == "cpu" ? "cpu" : dev,
                            "--mode", mode, "--steps", std::to_string(steps)};
                  if (p.ckpt) s.args.push_back("--checkpoint-activations");
                  if (amp) s.args.insert(s.args.end(), {"--autocast", "bf16"});
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
                  CaseId c = id(mode == "eager" ? "pytorch" : "pytorch-" + mode, t);
                  add_peer(cases, c, s, o.repetitions > 0 ? o.repetitions : 5);
                }
            }
    }
  }
  return cases;
}

}  // namespace

DLB_SUITE(gpt2)
    .about("GPT-2 training steps (forward, backward, AdamW; --checkpoint-activations) on llm.c's configs: ours (CPU, GPU) "
           "against the PyTorch peer (eager, compile; CPU, GPU) and llm.c's C trainer (--impl llmc); tokens/s and MFU; "
           "--op infer: prefill tokens/s and "
           "K/V-cache decode p50/p99 at batch 1")
    .axis("config", {"gpt2-124m"}, {"gpt-mini"})
    .axis("batch", {4}, {1})
    .axis("seq", {64, 256}, {32})
    .axis("impl", {"ours", "pytorch"}, {"ours"})
    .axis("peer_mode", {"eager"})
    .axis("op", {"train"})
    .axis("ckpt", {"off"})
    .axis("attn", {"flash"})
    .axis("dtype", {"fp32"})
    .takes({flag::batch(), flag::profile(), flag::cuda_graph(), FlagSpec{"--seq-len", "sequence lengths (tokens per sample)", "seq", true, FlagSpec::Parse::ints, 1 << 16},
            FlagSpec{"--config", "GPT-2 configs: gpt2-124m, gpt-mini", "config", true, FlagSpec::Parse::words, 0,
                     {"gpt2-124m", "gpt-mini"}},
            FlagSpec{"--impl", "ours, pytorch, llmc (llm.c's train_gpt2.c in $DLBENCH_LLMC_DIR: CPU, B=4, T=64)", "impl",
                     true, FlagSpec::Parse::words, 0, {"ours", "pytorch", "llmc"}},
            FlagSpec{"--peer-mode", "the PyTorch peer's modes: eager, compile", "peer_mode", true, FlagSpec::Parse::words, 0,
                     {"eager", "compile"}},
            FlagSpec{"--op", "train (the AdamW step), infer (prefill and K/V-cache decode at batch 1), or both", "op", true,
                     FlagSpec::Parse::words, 0, {"train", "infer"}},
            FlagSpec{"--checkpoint-activations", "off, on or both: recompute each block's activations in backward", "ckpt",
                     true, FlagSpec::Parse::words, 0, {"off", "on"}},
            FlagSpec{"--dtype", "ours on a GPU: fp32, tf32, bf16, fp16 (its GEMMs autocast, fp16 with loss scaling; the "
                     "rest fp32); ours on the CPU: fp32, bf16 (PyTorch's autocast policy; tf32, fp16 there: skipped); "
                     "the peers fp32 and (PyTorch) bf16 autocast", "dtype", true,
                     FlagSpec::Parse::words, 0, {"fp32", "tf32", "bf16", "fp16"}},
            FlagSpec{"--attn", "ours' attention core: flash (fused, the default), unfused (the T x T probabilities kept), "
                     "or both", "attn", true, FlagSpec::Parse::words, 0, {"flash", "unfused"}}})
    .cases(expand)
    .derived(gpt2_derive)
    .summary(gpt2_summarize);

}  // namespace dlb::bench
