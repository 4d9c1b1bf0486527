// Autocast policy table, device/dtype rules and the dynamic loss scaler (see amp.h).
#include "models/amp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "kernels/common/errors.h"
#include "kernels/cpu/threads.h"
#include "models/executor.h"
#include "models/half.h"
#include "models/layers/linear.h"
#include "models/net.h"

namespace dlb::models {

const char* cast_kind_name(CastKind k) {
  switch (k) {
    case CastKind::lower_precision: return "lower_precision";
    case CastKind::fp32: return "fp32";
    case CastKind::input_type: return "input_type";
    case CastKind::promote: return "promote";
  }
  return "?";
}

// The op lists follow PyTorch's autocast documentation (CUDA ops that autocast to float16 / to
// float32 / promote); ops not listed there run in their input's type, and we list the ones our
// models use so the policy is explicit rather than a silent default.
const std::vector<OpCast>& autocast_table() {
  using K = CastKind;
  static const std::vector<OpCast> t = {
      // matrix products: half type, fp32 accumulation
      {"conv1d", K::lower_precision}, {"conv2d", K::lower_precision}, {"conv3d", K::lower_precision},
      {"conv_transpose1d", K::lower_precision}, {"conv_transpose2d", K::lower_precision},
      {"conv_transpose3d", K::lower_precision}, {"linear", K::lower_precision}, {"matmul", K::lower_precision},
      {"mm", K::lower_precision}, {"bmm", K::lower_precision}, {"addmm", K::lower_precision},
      {"baddbmm", K::lower_precision}, {"addbmm", K::lower_precision}, {"prelu", K::lower_precision},
      {"scaled_dot_product_attention", K::lower_precision}, {"rnn_tanh", K::lower_precision},
      {"lstm", K::lower_precision},
      // numerically sensitive: fp32
      {"softmax", K::fp32}, {"log_softmax", K::fp32}, {"cross_entropy", K::fp32}, {"nll_loss", K::fp32},
      {"mse_loss", K::fp32}, {"l1_loss", K::fp32}, {"smooth_l1_loss", K::fp32}, {"kl_div", K::fp32},
      {"binary_cross_entropy_with_logits", K::fp32}, {"sum", K::fp32}, {"mean", K::fp32}, {"prod", K::fp32},
      {"cumsum", K::fp32}, {"norm", K::fp32}, {"logsumexp", K::fp32}, {"layer_norm", K::fp32},
      {"group_norm", K::fp32}, {"exp", K::fp32}, {"log", K::fp32}, {"pow", K::fp32}, {"rsqrt", K::fp32},
      {"softplus", K::fp32},
      // elementwise / pooling / views: the input's type
      {"relu", K::input_type}, {"sigmoid", K::input_type}, {"tanh", K::input_type}, {"gelu", K::input_type},
      {"max_pool2d", K::input_type}, {"avg_pool2d", K::input_type}, {"adaptive_avg_pool2d", K::input_type},
      {"dropout", K::input_type}, {"flatten", K::input_type}, {"reshape", K::input_type}, {"add", K::input_type},
      {"mul", K::input_type}, {"batch_norm", K::input_type}, {"embedding", K::input_type},
      {"select", K::input_type},
      // several inputs: the widest one
      {"cat", K::promote}, {"stack", K::promote}, {"addcmul", K::promote}, {"addcdiv", K::promote},
      {"index_put", K::promote},
      // optimizer updates on fp32 master weights
      {"sgd", K::fp32}, {"adam", K::fp32}, {"adamw", K::fp32},
  };
  return t;
}

CastKind cast_kind(const std::string& op) {
  for (const auto& e : autocast_table())
    if (op == e.op) return e.kind;
  throw std::invalid_argument("autocast policy: unknown op '" + op + "'");
}

CastPolicy cast_policy(const std::string& op, DType autocast_dtype, DType input) {
  const CastKind k = cast_kind(op);
  const DType f32 = DType::fp32;
  switch (autocast_dtype) {
    case DType::fp32:
    case DType::fp64:
      // autocast off: everything in the input's dtype (fp32 in our models)
      return {k, input, input == DType::fp64 ? DType::fp64 : f32, input};
    case DType::tf32:
      // fp32 tensors; matrix products use TF32 tensor cores (10-bit mantissa inputs, fp32 sums)
      if (k == CastKind::lower_precision) return {k, DType::tf32, f32, f32};
      return {k, input, f32, input};
    case DType::fp16:
    case DType::bf16:
      switch (k) {
        case CastKind::lower_precision: return {k, autocast_dtype, f32, autocast_dtype};
        case CastKind::fp32: return {k, f32, f32, f32};
        case CastKind::input_type:
        case CastKind::promote: return {k, input, f32, input};
      }
  }
  throw std::invalid_argument(std::string("autocast policy: dtype ") + dtype_name(autocast_dtype));
}

bool dtype_supported(DType t, bool gpu) {
  if (gpu) return t == DType::fp32 || t == DType::tf32 || t == DType::fp16 || t == DType::bf16;
  return t == DType::fp32 || t == DType::bf16;
}

void check_dtype_for_device(DType t, bool gpu) {
  if (dtype_supported(t, gpu)) return;
  const std::string n = dtype_name(t);
  if (!gpu && (t == DType::fp16 || t == DType::tf32))
    throw UsageError("--dtype " + n + ": " + n + " mixed precision needs a CUDA GPU; the CPU runs fp32 and bf16");
  throw UsageError("--dtype " + n + ": not a training dtype (expected fp32, tf32, fp16 or bf16)");
}

void check_dtypes_for_run(const std::vector<DType>& dtypes, bool any_gpu) {
  if (any_gpu || dtypes.empty()) return;
  for (DType t : dtypes)
    if (dtype_supported(t, false)) return;
  check_dtype_for_device(dtypes.front(), false);
}

GradScaler::GradScaler(GradScalerConfig cfg) : cfg_(cfg), scale_(cfg.init_scale) {
  if (!(cfg.init_scale > 0) || !(cfg.growth_factor > 1) || !(cfg.backoff_factor > 0 && cfg.backoff_factor < 1) ||
      cfg.growth_interval < 1)
    throw std::invalid_argument("GradScaler: needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1");
}

bool GradScaler::unscale(float* g, std::size_t n) {
  if (!cfg_.enabled) return true;
  // PyTorch multiplies by the fp32 reciprocal (not a division per element).
  const float inv = 1.0f / scale_;
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    finite &= std::isfinite(g[i]);
    g[i] *= inv;
  }
  found_inf_ = found_inf_ || !finite;
  return finite;
}

void GradScaler::update() {
  ++steps_;
  if (cfg_.enabled) {
    if (found_inf_) {
      ++skipped_;
      scale_ *= cfg_.backoff_factor;
      tracker_ = 0;
    } else if (++tracker_ == cfg_.growth_interval) {
      const float grown = scale_ * cfg_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      tracker_ = 0;
    }
  }
  found_inf_ = false;
}

}  // namespace dlb::models

// ---- AmpTrainer ----

namespace dlb::models {

AmpTrainer::AmpTrainer(Model& m, Optimizer& opt, DType dtype, GradScalerConfig cfg)
    : m_(m), opt_(opt), dtype_(dtype), scaler_([&] {
        if (!needs_loss_scaling(dtype)) cfg.enabled = false;
        return cfg;
      }()),
      exec_(std::make_unique<Executor>(dtype)) {
  if (!(dtype == DType::fp32 || dtype == DType::fp16 || dtype == DType::bf16 || dtype == DType::tf32))
    throw std::invalid_argument(std::string("AmpTrainer: dtype ") + dtype_name(dtype));
  // A parameter is cast when every layer that reads it is a lower-precision one: a tied weight that an
  // fp32 or input-type layer reads too (GPT-2's wte: the embedding lookup and the LM head) keeps its
  // fp32 values, as in PyTorch, where autocast casts only the matmul's copy; the head's bf16 step
  // casts its operand itself (lm_head_bf16; emulated, the head reads the fp32 weight).
  std::vector<Param*> fp32_users;
  for (const Node& nd : m_.nodes()) {
    const bool low = cast_kind(op_info(nd.layer->op()).autocast) == CastKind::lower_precision;  // (throws for no rule)
    for (Param* p : nd.layer->params()) {
      auto& into = low ? cast_params_ : fp32_users;
      if (std::find(into.begin(), into.end(), p) == into.end()) into.push_back(p);
    }
  }
  cast_params_.erase(std::remove_if(cast_params_.begin(), cast_params_.end(),
                                    [&](Param* p) {
                                      return std::find(fp32_users.begin(), fp32_users.end(), p) != fp32_users.end();
                                    }),
                     cast_params_.end());
}

AmpTrainer::~AmpTrainer() = default;

const Plan& AmpTrainer::plan(int n) { return exec_->plan(m_, n); }

std::size_t AmpTrainer::activation_bytes() const { return exec_->activation_bytes(); }

float AmpTrainer::step(const Batch& b) {
  const float loss = gradients(b);
  skipped_ = !scaler_.should_step();
  if (!skipped_) opt_.step();
  scaler_.update();
  return loss;
}

float AmpTrainer::gradients(const Batch& b, Profiler* prof) {
  if (b.n <= 0) throw UsageError("batch must be positive");
  m_.zero_grad();
  // Master weights aside; lower-precision layers see their parameters rounded (autocast casts the
  // weight and bias of linear/conv on every call). A weight its plan step casts itself is left as it
  // is: linear_bf16 reads W through a round-to-nearest-even cast to bf16, the rounding autocast does,
  // so the products are the same bits (at gpt2-124m 85 M of the 85.1 M values to cast).
  std::vector<std::size_t> cast;  // indices into cast_params_ rounded for this step
  if (dtype_ != DType::fp32) {
    std::vector<const Param*> self_cast;
    for (const Step& s : exec_->plan(m_, b.n).steps)
      if (s.kind == StepKind::linear_bf16) self_cast.push_back(&static_cast<Linear&>(*m_.nodes()[std::size_t(s.node)].layer).weight);
    for (std::size_t k = 0; k < cast_params_.size(); ++k)
      if (std::find(self_cast.begin(), self_cast.end(), cast_params_[k]) == self_cast.end()) cast.push_back(k);
  }
  // The masters' buffers are kept from step to step (a fresh buffer each step paid its page faults
  // every step); copy and rounding in one pass per 64 KiB chunk, over the kernel threads.
  constexpr std::size_t kChunk = 16384;
  master_.resize(cast_params_.size());
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // (param, first value)
  for (const std::size_t k : cast) {
    master_[k].resize(cast_params_[k]->value.size());
    for (std::size_t at = 0; at < master_[k].size(); at += kChunk) chunks.emplace_back(k, at);
  }
  cpu::parallel_tasks(int(chunks.size()), [&](int i) {
    const auto [k, at] = chunks[std::size_t(i)];
    float* v = cast_params_[k]->value.data() + at;
    const std::size_t n = std::min(kChunk, master_[k].size() - at);
    std::memcpy(master_[k].data() + at, v, n * sizeof(float));
    round_to(dtype_, v, n);
  });
  // Masters back as the forward-backward ends, also when it throws (a bad token, out of memory): the
  // model must not keep rounded weights for whoever catches it (a sweep goes on, a test reads them).
  float loss = 0;
  {
    struct MastersBack {
      AmpTrainer& t;
      const std::vector<std::size_t>& cast;
      ~MastersBack() {
        for (const std::size_t k : cast) t.cast_params_[k]->value.swap(t.master_[k]);
      }
    } back{*this, cast};
    loss = exec_->forward_backward(m_, b, {prof, nullptr, scaler_.scale()});
  }
  // Unscale (fp16).
  if (scaler_.config().enabled)
    for (Param* p : m_.params()) scaler_.unscale(p->grad.data(), p->grad.size());
  return loss;
}

}  // namespace dlb::models
