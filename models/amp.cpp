// Autocast policy table, device/dtype rules and the dynamic loss scaler (see amp.h).
#include "models/amp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "models/half.h"
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
      {"mul", K::input_type}, {"batch_norm", K::input_type},
      // several inputs: the widest one
      {"cat", K::promote}, {"stack", K::promote}, {"addcmul", K::promote}, {"addcdiv", K::promote},
      {"index_put", K::promote},
      // optimizer updates on fp32 master weights
      {"sgd", K::fp32}, {"adam", K::fp32},
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

namespace {
std::string op_of(const std::string& kind) {
  if (kind == "Conv2d") return "conv2d";
  if (kind == "ConvTranspose2d") return "conv_transpose2d";
  if (kind == "Linear") return "linear";
  if (kind == "ReLU") return "relu";
  if (kind == "Sigmoid") return "sigmoid";
  if (kind == "MaxPool2d") return "max_pool2d";
  if (kind == "Flatten") return "flatten";
  throw std::invalid_argument("AmpTrainer: no autocast rule for layer kind '" + kind + "'");
}
bool half_like(DType t) { return t == DType::fp16 || t == DType::bf16 || t == DType::tf32; }
}  // namespace

AmpTrainer::AmpTrainer(Sequential& m, Optimizer& opt, DType dtype, GradScalerConfig cfg)
    : m_(m), opt_(opt), dtype_(dtype), scaler_([&] {
        if (!needs_loss_scaling(dtype)) cfg.enabled = false;
        return cfg;
      }()),
      shapes_(std::make_unique<std::vector<Shape>>()) {
  if (!(dtype == DType::fp32 || half_like(dtype)))
    throw std::invalid_argument(std::string("AmpTrainer: dtype ") + dtype_name(dtype));
  for (Layer* l : m_.layers()) {
    const std::string op = op_of(l->kind());
    kinds_.push_back(static_cast<int>(cast_kind(op)));
    exact_.push_back(op == "relu" || op == "max_pool2d" || op == "flatten");
  }
  // ReLU + MaxPool2d run fused, as the model's own step does: both keep their input's type and are
  // exact, so the pair needs no rounding in between (max pooling commutes with ReLU).
  const auto layers = m_.layers();
  fused_.assign(layers.size(), 0);
  for (std::size_t i = 1; i + 1 < layers.size(); ++i)
    fused_[i] = layers[i]->kind() == "ReLU" && dynamic_cast<MaxPool2d*>(layers[i + 1]) != nullptr;
}

AmpTrainer::~AmpTrainer() = default;

void AmpTrainer::plan(int n) {
  if (planned_n_ == n) return;
  const auto layers = m_.layers();
  auto& sh = *shapes_;
  sh.assign(layers.size() + 1, Shape{});
  sh[0] = m_.input_shape(n);
  for (std::size_t i = 0; i < layers.size(); ++i) sh[i + 1] = layers[i]->out_shape(sh[i]);
  acts_.resize(layers.size());
  grads_.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    acts_[i].assign(sh[i + 1].size(), 0.f);
    grads_[i].assign(i == 0 ? 0 : sh[i].size(), 0.f);
  }
  input_.assign(sh[0].size(), 0.f);
  dout_.assign(sh.back().size(), 0.f);
  planned_n_ = n;
}

float AmpTrainer::step(const Batch& b) {
  if (b.n <= 0) throw UsageError("batch must be positive");
  plan(b.n);
  const auto layers = m_.layers();
  const auto& sh = *shapes_;
  const std::size_t L = layers.size();
  const bool lower_on = dtype_ != DType::fp32;
  // bf16 on a CPU with bf16 dot products: the layers really compute in bf16 (models/layers.h).
  const Bf16Compute bf16_compute(dtype_ == DType::bf16 && bf16_compute_native());
  m_.zero_grad();

  // Master weights aside; lower-precision layers see their parameters rounded (autocast casts the
  // weight and bias of linear/conv on every call).
  master_.resize(0);
  if (lower_on)
    for (std::size_t i = 0; i < L; ++i) {
      if (kinds_[i] != int(CastKind::lower_precision)) continue;
      for (Param* p : layers[i]->params()) {
        master_.push_back(p->value);
        round_to(dtype_, p->value.data(), p->value.size());
      }
    }

  blocked_fwd_.assign(L, 0);
  pooled_fwd_.assign(L, 0);
  blocked_in_for_ = 0;
  // Forward. t = dtype of the current activation.
  std::vector<DType> in_t(L + 1, DType::fp32);
  std::memcpy(input_.data(), b.x, input_.size() * sizeof(float));
  float* cur = input_.data();
  DType t = DType::fp32;
  for (std::size_t i = 0; i < L; ++i) {
    if (fused_[i]) {  // ReLU + MaxPool2d: one pass, the type passes through
      in_t[i] = in_t[i + 1] = t;
      ++i;
      static_cast<MaxPool2d*>(layers[i])->forward_relu(sh[i - 1], cur, acts_[i].data());
      cur = acts_[i].data();
      continue;
    }
    const bool lower = lower_on && kinds_[i] == int(CastKind::lower_precision);
    // bf16 compute, a first Conv2d -> ReLU -> MaxPool2d: one pass per image (our bf16 kernel, pooled in
    // cache; its backward over the pool's winners below). Both kernels round x to bf16 as they read
    // it, so the input needs no rounding pass of ours.
    if (lower && bf16_compute_active() && i == 0 && i + 2 < L && fused_[i + 1])
      if (auto* conv = dynamic_cast<Conv2d*>(layers[i])) {
        // its pooled output in bf16 nChw16c as well when the next layer is a conv that reads that
        // (the bf16 Conv2d -> ReLU -> MaxPool2d(2) path below, oneDNN's src layout)
        const std::size_t nx = i + 3;
        auto* next = nx + 2 < L && fused_[nx + 1] && kinds_[nx] == int(CastKind::lower_precision)
                         ? dynamic_cast<Conv2d*>(layers[nx])
                         : nullptr;
        const bool hand_on = next && sh[nx].c % 16 == 0 && sh[nx + 1].c % 16 == 0 &&
                             static_cast<MaxPool2d*>(layers[nx + 2])->k == 2 && next->reads_nchw16c_src(sh[nx]);
        if (hand_on) blocked_in_.resize(sh[nx].size());
        if (conv->forward_relu_pool_bf16(sh[i], *static_cast<MaxPool2d*>(layers[i + 2]), cur, acts_[i + 2].data(),
                                         hand_on ? blocked_in_.data() : nullptr)) {
          blocked_in_for_ = hand_on ? nx : 0;
          pooled_fwd_[i] = 1;
          t = dtype_;
          in_t[i] = in_t[i + 1] = in_t[i + 2] = t;
          cur = acts_[i + 2].data();
          i += 2;
          continue;
        }
      }
    if (lower && t != dtype_) round_to(dtype_, cur, sh[i].size());  // the cast of the op's input
    in_t[i] = lower ? dtype_ : t;
    // bf16 compute, Conv2d -> ReLU -> MaxPool2d(2): the pool reads the conv's bf16 output in
    // oneDNN's own layout (no reorder to fp32 NCHW, half the bytes read); the conv's fp32 output is
    // not materialized (its backward does not read it). Same values as the path below.
    if (lower && bf16_compute_active() && i + 2 < L && fused_[i + 1] && sh[i + 1].c % 16 == 0)
      if (auto* conv = dynamic_cast<Conv2d*>(layers[i])) {
        auto* pool = static_cast<MaxPool2d*>(layers[i + 2]);
        blocked_.resize(sh[i + 1].size());
        const bool ran_fwd =
            pool->k == 2 && ((blocked_in_for_ == i && conv->forward_bf16_nchw16c_src(sh[i], blocked_in_.data(), blocked_.data())) ||
                             conv->forward_bf16_nchw16c(sh[i], cur, blocked_.data()));
        if (ran_fwd) {
          pool->forward_relu_nchw16c_bf16(sh[i + 1], blocked_.data(), acts_[i + 2].data());
          blocked_fwd_[i] = 1;
          t = dtype_;
          in_t[i + 1] = in_t[i + 2] = t;
          cur = acts_[i + 2].data();
          i += 2;
          continue;
        }
      }
    layers[i]->forward(sh[i], cur, acts_[i].data());
    if (lower) t = dtype_ == DType::tf32 ? DType::fp32 : dtype_;  // tf32: fp32 out
    else if (kinds_[i] == int(CastKind::fp32)) t = DType::fp32;
    const bool rounded = lower && bf16_compute_active() && layers[i]->bf16_output_rounded();
    if (half_like(t) && !exact_[i] && !rounded) round_to(t, acts_[i].data(), acts_[i].size());
    cur = acts_[i].data();
  }
  in_t[L] = t;

  // Loss in fp32 on the widened output; its gradient carries the loss scale.
  const Shape& o = sh.back();
  const float loss = loss_forward_backward(m_.loss(), acts_.back().data(), b, o.size(), int(o.per_item()), dout_.data());
  const float s = scaler_.scale();
  if (s != 1.0f)
    for (float& d : dout_) d *= s;

  // Backward: each gradient in the dtype of the tensor it belongs to.
  for (std::size_t i = L; i-- > 0;) {
    float* dy = i + 1 == L ? dout_.data() : grads_[i + 1].data();
    const std::size_t ny = sh[i + 1].size();
    if (i + 1 == L && half_like(in_t[L]) && in_t[L] != DType::tf32) round_to(in_t[L], dy, ny);
    const bool lower = lower_on && kinds_[i] == int(CastKind::lower_precision);
    if (lower && dtype_ == DType::tf32) round_to(DType::tf32, dy, ny);  // tensor cores read dy as tf32
    // MaxPool2d + ReLU after a bf16 Conv2d that wrote nChw16c: the pool's dx goes to the conv in that
    // layout (bf16, no reorder of dy), then the conv's backward runs here and i moves to the conv,
    // whose roundings follow below as for any layer.
    bool ran = false;
    if (i >= 2 && fused_[i - 1] && (blocked_fwd_[i - 2] || pooled_fwd_[i - 2])) {
      const std::size_t c = i - 2;
      auto* conv = static_cast<Conv2d*>(layers[c]);
      float* cdx = c == 0 ? nullptr : grads_[c].data();
      auto* pool = static_cast<MaxPool2d*>(layers[i]);
      // a first layer: dW, db over the pool's winners in bf16 (no dense dy at all), where that kernel runs
      if (c == 0 && conv->backward_relu_pool_bf16(sh[c], *pool, input_.data(), acts_[i].data(), dy)) {
        i = c, ran = true;
      } else if (pooled_fwd_[c]) {  // (its input was left unrounded: no other backward may read it)
        throw std::logic_error("AmpTrainer: the fused bf16 first layer's backward did not run");
      } else if (blocked_fwd_[c] && conv->backward_takes_nchw16c(sh[c], cdx != nullptr)) {
        pool->backward_relu_nchw16c_bf16(sh[i - 1], acts_[i].data(), dy, blocked_.data());
        const float* cx = c == 0 ? input_.data() : acts_[c - 1].data();
        if (!conv->backward_bf16_nchw16c(sh[c], cx, blocked_.data(), cdx))
          throw std::logic_error("AmpTrainer: conv backward refused the nChw16c dy it accepted");
        i = c, ran = true;
      }
    }
    if (!ran && i > 1 && fused_[i - 1]) {  // MaxPool2d + the ReLU before it: dx straight to the ReLU's input
      static_cast<MaxPool2d*>(layers[i])->backward_relu(sh[i - 1], acts_[i].data(), dy, grads_[i - 1].data());
      --i;
      continue;
    }
    const float* xin = i == 0 ? input_.data() : acts_[i - 1].data();
    float* dx = i == 0 ? nullptr : grads_[i].data();
    if (!ran) layers[i]->backward(sh[i], xin, acts_[i].data(), dy, dx);
    const DType gt = in_t[i] == DType::tf32 ? DType::fp32 : in_t[i];
    const bool lower_i = lower_on && kinds_[i] == int(CastKind::lower_precision);  // (i may have moved)
    const bool dx_rounded = lower_i && bf16_compute_active() && layers[i]->bf16_dx_rounded();
    if (dx && half_like(gt) && !exact_[i] && !dx_rounded) round_to(gt, dx, sh[i].size());
    if (lower_i && dtype_ != DType::tf32)  // dW, db come out of a half-type GEMM, then widen into .grad
      for (Param* p : layers[i]->params()) round_to(dtype_, p->grad.data(), p->grad.size());
  }

  // Masters back; unscale (fp16), skip on inf/NaN, fp32 optimizer step.
  if (lower_on) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < L; ++i) {
      if (kinds_[i] != int(CastKind::lower_precision)) continue;
      for (Param* p : layers[i]->params()) p->value.swap(master_[k++]);
    }
  }
  if (scaler_.config().enabled)
    for (Param* p : m_.params()) scaler_.unscale(p->grad.data(), p->grad.size());
  skipped_ = !scaler_.should_step();
  if (!skipped_) opt_.step();
  scaler_.update();
  return loss;
}

}  // namespace dlb::models
