// Plans (see plan.h): the rules table that turns a model's nodes into steps, then per step the
// gradient bookkeeping, the profile names and FLOPs, and the autocast roundings.
#include "models/plan.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/threads.h"
#include "models/amp.h"
#include "models/model.h"

namespace dlb::models {

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::layer: return "layer";
    case StepKind::relu_pool: return "relu_pool";
    case StepKind::relu_dropout: return "relu_dropout";
    case StepKind::conv_relu_pool: return "conv_relu_pool";
    case StepKind::conv_sparse_dy: return "conv_sparse_dy";
    case StepKind::conv_bf16: return "conv_bf16";
    case StepKind::conv_sparse_dy_bf16: return "conv_sparse_dy_bf16";
    case StepKind::conv_transpose_bf16: return "conv_transpose_bf16";
    case StepKind::linear_bf16: return "linear_bf16";
    case StepKind::lm_head_bf16: return "lm_head_bf16";
    case StepKind::recurrent_bf16: return "recurrent_bf16";
    case StepKind::attention_bf16: return "attention_bf16";
    case StepKind::conv_relu_pool_bf16: return "conv_relu_pool_bf16";
    case StepKind::conv_bf16_relu_pool: return "conv_bf16_relu_pool";
  }
  return "?";
}

// oneDNN's bf16 convolutions write y and dx rounded to bf16 (Dt::f32_as_bf16); the sparse-dy bf16
// kernel rounds dx too.
bool rounds_output(StepKind k) { return k == StepKind::conv_bf16 || k == StepKind::conv_sparse_dy_bf16; }
bool rounds_dx(StepKind k) { return k == StepKind::conv_bf16 || k == StepKind::conv_sparse_dy_bf16; }

bool bf16_compute_native() {
  return cpu::isa_allows(cpu::Isa::avx512_bf16) && cpu::onednn::available() && cpu::onednn::bf16_native();
}

bool Plan::current(const Model& m, int n_, DType dtype_, Device device_) const {
  return n == n_ && dtype == dtype_ && device == device_ && revision == m.revision() && isa == cpu::isa_active() &&
         threads == cpu::kernel_threads();
}

namespace {

// What the rules look at: the model, the shapes, and who reads each value (the loss counts as a reader).
struct Ctx {
  const Model& m;
  const Plan& p;
  std::vector<int> readers;
  Op op(int i) const { return m.nodes()[std::size_t(i)].layer->op(); }
  int count() const { return int(m.nodes().size()); }
  const Node& node(int i) const { return m.nodes()[std::size_t(i)]; }
  const Shape& shape(int v) const { return p.shapes[std::size_t(v)]; }
  // Node j is the one reader of node i's output, and reads nothing else.
  bool feeds_only(int i, int j) const {
    const int v = node(i).out;
    return j < count() && readers[std::size_t(v)] == 1 && node(j).in.size() == 1 && node(j).in[0] == v;
  }
  bool cpu() const { return p.device == Device::cpu; }
  const Conv2d& conv(int i) const { return static_cast<const Conv2d&>(*node(i).layer); }
  Conv2dShape conv_shape(int i) const { return conv(i).conv_shape(shape(node(i).in[0])); }
  int pool_k(int i) const { return static_cast<const MaxPool2d&>(*node(i).layer).k; }
};

// The CPU kernels a step runs, by the names records and profiles use (Step::fwd_algo / bwd_algo):
// the conv table's row at the plan's ISA level for our fp32 and fused kernels (kernels/cpu/conv2d
// algos.cpp picks it the same way when the step runs), oneDNN or our bf16 GEMM for the bf16 kinds;
// "" where a layer has no choice of kernel. A backward that decides at run time (sparse dy or dense)
// names both, "a|b".
void name_algos(const Ctx& c, Step& s) {
  using cpu::ConvDir;
  const bool conv = c.op(s.node) == Op::conv2d;
  auto row = [&](ConvDir d, int pool_k = 0) {
    return std::string(cpu::algo_name(cpu::choose(c.conv_shape(s.node), d, c.p.isa, pool_k)));
  };
  auto dense_bwd = [&] {  // Conv2d::backward: dW always, dx when wanted
    return s.dx[0] ? row(ConvDir::backward_data) + "+" + row(ConvDir::backward_filter) : row(ConvDir::backward_filter);
  };
  const int pool = s.nodes == 3 ? c.pool_k(s.node + 2) : 0;
  switch (s.kind) {
    case StepKind::layer:
      if (conv) s.fwd_algo = row(ConvDir::forward), s.bwd_algo = dense_bwd();
      return;
    case StepKind::relu_pool:
    case StepKind::relu_dropout: return;
    case StepKind::conv_relu_pool:
      s.fwd_algo = row(ConvDir::relu_pool_forward, pool), s.bwd_algo = row(ConvDir::relu_pool_backward_filter, pool);
      return;
    case StepKind::conv_sparse_dy:
      s.fwd_algo = row(ConvDir::forward), s.bwd_algo = row(ConvDir::sparse_dy) + "|" + dense_bwd();
      return;
    case StepKind::conv_bf16:
    case StepKind::conv_transpose_bf16: s.fwd_algo = s.bwd_algo = "onednn_bf16"; return;
    case StepKind::conv_sparse_dy_bf16:
      s.fwd_algo = "onednn_bf16", s.bwd_algo = row(ConvDir::sparse_dy_bf16) + "|onednn_bf16";
      return;
    case StepKind::linear_bf16:
    case StepKind::lm_head_bf16: s.fwd_algo = s.bwd_algo = "bf16_gemm"; return;
    case StepKind::recurrent_bf16: s.fwd_algo = s.bwd_algo = "bf16_gemm+fp32_cell"; return;
    case StepKind::attention_bf16: s.fwd_algo = s.bwd_algo = "bf16_gemm+fp32_core"; return;
    case StepKind::conv_relu_pool_bf16:
      s.fwd_algo = row(ConvDir::relu_pool_forward_bf16, pool);
      s.bwd_algo = row(ConvDir::relu_pool_backward_filter_bf16, pool);
      return;
    case StepKind::conv_bf16_relu_pool:
      s.fwd_algo = "onednn_bf16_nchw16c";
      if (s.pool_bwd == PoolConvBackward::winners) s.bwd_algo = row(ConvDir::relu_pool_backward_filter_bf16, pool);
      else if (s.pool_bwd == PoolConvBackward::nchw16c_dy) s.bwd_algo = "onednn_bf16_nchw16c";
      else s.bwd_algo = s.sparse_dy ? row(ConvDir::sparse_dy_bf16) + "|onednn_bf16" : "onednn_bf16";
      return;
  }
}

// Each rule: how many nodes from node i its step takes (0: it does not apply there).
using Match = int (*)(const Ctx& c, int i);

// ReLU -> MaxPool2d, the ReLU's output read by the pool alone, its input a layer's output.
int relu_pool(const Ctx& c, int i) {
  return c.cpu() && c.op(i) == Op::relu && i + 1 < c.count() && c.op(i + 1) == Op::max_pool2d && c.feeds_only(i, i + 1) &&
                 !c.m.is_input(c.node(i).in[0])
             ? 2
             : 0;
}
// ReLU -> Dropout (a Transformer's feed-forward), the ReLU's output read by the dropout alone; fp32
// only (under autocast the two round differently: ReLU is exact, the dropout's scale is not).
int relu_dropout(const Ctx& c, int i) {
  return c.cpu() && c.p.dtype == DType::fp32 && c.op(i) == Op::relu && i + 1 < c.count() &&
                 c.op(i + 1) == Op::dropout && c.feeds_only(i, i + 1)
             ? 2
             : 0;
}
// Conv2d -> ReLU -> MaxPool2d, the conv's output read by the ReLU alone.
bool conv_relu_pool_chain(const Ctx& c, int i) {
  return c.op(i) == Op::conv2d && c.feeds_only(i, i + 1) && relu_pool(c, i + 1) == 2;
}
// ... with the conv reading a model input (a first layer: no input gradient).
bool first_conv_relu_pool_chain(const Ctx& c, int i) {
  return conv_relu_pool_chain(c, i) && c.m.is_input(c.node(i).in[0]);
}
int conv_relu_pool(const Ctx& c, int i) {
  return c.p.dtype == DType::fp32 && first_conv_relu_pool_chain(c, i) &&
                 cpu::conv2d_relu_pool_fusable(c.conv_shape(i), c.pool_k(i + 2))
             ? 3
             : 0;
}
int conv_relu_pool_bf16(const Ctx& c, int i) {
  return c.p.bf16_native && first_conv_relu_pool_chain(c, i) &&
                 cpu::conv2d_relu_pool_bf16_fusable(c.conv_shape(i), c.pool_k(i + 2))
             ? 3
             : 0;
}
// The pool reads the conv's bf16 output in oneDNN's nChw16c (no reorder): 2x2 pools, K % 16 == 0,
// where oneDNN writes that layout for this shape.
int conv_bf16_relu_pool(const Ctx& c, int i) {
  return c.p.bf16_native && conv_relu_pool_chain(c, i) && c.shape(c.node(i).out).c() % 16 == 0 && c.pool_k(i + 2) == 2 &&
                 cpu::onednn::conv2d_forward_writes_nchw16c(c.conv_shape(i), true)
             ? 3
             : 0;
}
int conv_sparse_dy(const Ctx& c, int i) {
  return c.cpu() && c.op(i) == Op::conv2d && !c.p.bf16_native &&
                 cpu::conv2d_backward_sparse_dy_shape(c.conv_shape(i), false)
             ? 1
             : 0;
}
int conv_sparse_dy_bf16(const Ctx& c, int i) {
  return c.p.bf16_native && c.op(i) == Op::conv2d && cpu::conv2d_backward_sparse_dy_shape(c.conv_shape(i), true) ? 1 : 0;
}
int conv_bf16(const Ctx& c, int i) { return c.p.bf16_native && c.op(i) == Op::conv2d ? 1 : 0; }
int conv_transpose_bf16(const Ctx& c, int i) { return c.p.bf16_native && c.op(i) == Op::conv_transpose2d ? 1 : 0; }
int linear_bf16(const Ctx& c, int i) { return c.p.bf16_native && c.op(i) == Op::linear ? 1 : 0; }
int lm_head_bf16(const Ctx& c, int i) { return c.p.bf16_native && c.op(i) == Op::lm_head ? 1 : 0; }
int recurrent_bf16(const Ctx& c, int i) {
  return c.p.bf16_native && (c.op(i) == Op::rnn_tanh || c.op(i) == Op::lstm) &&
                 static_cast<const Recurrent&>(*c.node(i).layer).impl == RnnImpl::ours
             ? 1
             : 0;
}
int attention_bf16(const Ctx& c, int i) {
  return c.p.bf16_native && c.op(i) == Op::multihead_attention &&
                 static_cast<const MultiheadAttention&>(*c.node(i).layer).o.projections
             ? 1
             : 0;
}
int any_layer(const Ctx&, int) { return 1; }

// THE dispatch table: at each node the first rule that applies makes the next step.
const struct {
  StepKind kind;
  Match match;
} kRules[] = {
    {StepKind::conv_relu_pool_bf16, conv_relu_pool_bf16},
    {StepKind::conv_bf16_relu_pool, conv_bf16_relu_pool},
    {StepKind::conv_relu_pool, conv_relu_pool},
    {StepKind::relu_pool, relu_pool},
    {StepKind::relu_dropout, relu_dropout},
    {StepKind::conv_sparse_dy_bf16, conv_sparse_dy_bf16},
    {StepKind::conv_bf16, conv_bf16},
    {StepKind::conv_transpose_bf16, conv_transpose_bf16},
    {StepKind::linear_bf16, linear_bf16},
    {StepKind::lm_head_bf16, lm_head_bf16},
    {StepKind::recurrent_bf16, recurrent_bf16},
    {StepKind::attention_bf16, attention_bf16},
    {StepKind::conv_sparse_dy, conv_sparse_dy},
    {StepKind::layer, any_layer},
};

bool half_like(DType t) { return t == DType::fp16 || t == DType::bf16 || t == DType::tf32; }

// The autocast roundings of each step (PyTorch's policy, models/amp.h), following the dtype of every
// value from the inputs (fp32) on: a matrix product casts its inputs to the autocast dtype and
// returns that dtype (tf32: fp32), fp32 ops return fp32, the rest their input's dtype. Outputs,
// input gradients and weight gradients are rounded to the dtype of the tensor they belong to, except
// where the op is exact in any dtype or the step's kernel rounded them already.
void plan_autocast(const Model& m, Plan& p) {
  const DType dt = p.dtype;
  std::vector<DType> vt(p.shapes.size(), DType::fp32);
  auto lower = [&](int node) {
    return cast_kind(op_info(m.nodes()[std::size_t(node)].layer->op()).autocast) == CastKind::lower_precision;
  };
  for (Step& s : p.steps) {
    const Node& first = m.nodes()[std::size_t(s.node)];
    const Op op = first.layer->op();
    const CastKind kind = cast_kind(op_info(op).autocast);
    DType t_in = vt[std::size_t(s.in[0])];
    for (int v : s.in)
      if (vt[std::size_t(v)] == DType::fp32) t_in = DType::fp32;  // several inputs: the widest
    const bool low = dt != DType::fp32 && kind == CastKind::lower_precision;
    DType t_out = t_in, in_t = t_in;
    switch (s.kind) {
      case StepKind::relu_pool: break;  // exact, the dtype passes through
      case StepKind::conv_relu_pool_bf16:  // reads x as bf16 itself; y bf16
        in_t = t_out = dt;
        break;
      case StepKind::conv_bf16_relu_pool:
        for (std::size_t k = 0; k < s.in.size(); ++k) s.round_in[k] = vt[std::size_t(s.in[k])] != dt;
        in_t = t_out = dt;
        break;
      default:
        for (std::size_t k = 0; k < s.in.size(); ++k)
          s.round_in[k] = low && vt[std::size_t(s.in[k])] != dt && !m.integer_value(s.in[k]);
        in_t = low ? dt : t_in;
        t_out = low ? (dt == DType::tf32 ? DType::fp32 : dt) : kind == CastKind::fp32 ? DType::fp32 : t_in;
        if (half_like(t_out) && !op_info(op).exact && !rounds_output(s.kind)) s.round_out = t_out;
        const DType gt = in_t == DType::tf32 ? DType::fp32 : in_t;
        if (half_like(gt) && !op_info(op).exact && !rounds_dx(s.kind)) s.round_dx = gt;
        break;
    }
    if (s.kind != StepKind::relu_pool && dt != DType::fp32 && dt != DType::tf32 && lower(s.node)) s.round_dw = true;
    vt[std::size_t(s.out)] = t_out;
    // dy: at the loss, the output's dtype; before a matrix product under tf32, TF32 (tensor cores read it so)
    const bool last_low = lower(s.node + s.nodes - 1);
    if (s.out == m.output_value() && half_like(t_out) && t_out != DType::tf32) s.round_dy = t_out;
    else if (dt == DType::tf32 && last_low) s.round_dy = DType::tf32;
  }
  for (const Step& s : p.steps)
    for (std::size_t k = 0; k < s.in.size(); ++k)
      if (s.round_in[k] && m.is_input(s.in[k])) p.cast_input[std::size_t(-1 - m.producer(s.in[k]))] = 1;
}

}  // namespace

Plan make_plan(const Model& m, int n, DType dtype, Device device) {
  if (n <= 0) throw UsageError("batch must be positive");
  Plan p;
  p.n = n, p.dtype = dtype, p.device = device;
  p.isa = cpu::isa_active(), p.threads = cpu::kernel_threads(), p.revision = m.revision();
  p.bf16_native = device == Device::cpu && dtype == DType::bf16 && bf16_compute_native();
  p.shapes = m.value_shapes(n);
  Ctx c{m, p, std::vector<int>(p.shapes.size(), 0)};
  for (const Node& nd : m.nodes())
    for (int v : nd.in) ++c.readers[std::size_t(v)];
  ++c.readers[std::size_t(m.output_value())];

  for (int i = 0; i < c.count();) {
    Step s;
    for (const auto& r : kRules)
      if (const int k = r.match(c, i)) {
        s.kind = r.kind, s.nodes = k;
        break;
      }
    s.node = i, s.in = c.node(i).in, s.out = c.node(i + s.nodes - 1).out;
    i += s.nodes;
    p.steps.push_back(std::move(s));
  }

  // A first fused bf16 layer hands its output on in bf16 nChw16c to a conv_bf16_relu_pool step that
  // reads that layout as its source (its input channels % 16, oneDNN's src layout for the shape).
  for (Step& a : p.steps) {
    if (a.kind != StepKind::conv_relu_pool_bf16 || c.shape(a.out).c() % 16 != 0) continue;
    for (std::size_t j = 0; j < p.steps.size(); ++j) {
      Step& b = p.steps[j];
      if (b.kind == StepKind::conv_bf16_relu_pool && b.in[0] == a.out &&
          cpu::onednn::conv2d_forward_reads_nchw16c_src(c.conv_shape(b.node), true)) {
        a.hand_on = int(j), b.hand_from = int(&a - p.steps.data());
        break;
      }
    }
  }

  p.stored.assign(p.shapes.size(), 0);
  for (int k = 0; k < m.num_inputs(); ++k) p.stored[std::size_t(m.input_value(k))] = 1;
  std::vector<char> written(p.shapes.size(), 0);
  std::vector<Param*> seen;
  Shape in[Layer::kMaxInputs];
  for (Step& s : p.steps) {
    p.stored[std::size_t(s.out)] = 1;
    s.dx.assign(s.in.size(), 0), s.accumulate.assign(s.in.size(), 0), s.round_in.assign(s.in.size(), 0);
    for (std::size_t k = 0; k < s.in.size(); ++k) s.dx[k] = !m.is_input(s.in[k]);
    for (int j = s.node; j < s.node + s.nodes; ++j) {
      const Node& nd = c.node(j);
      s.name += (j > s.node ? "+" : "") + m.layer_name(std::size_t(j));
      bool dx = false;
      for (std::size_t k = 0; k < nd.in.size(); ++k) in[k] = c.shape(nd.in[k]), dx |= !m.is_input(nd.in[k]);
      const double f = nd.layer->forward_flops(Shapes(in, int(nd.in.size())));
      s.fwd_flops += f, s.bwd_flops += (dx ? 2 : 1) * f;
      for (Param* q : nd.layer->params())
        if (std::find(seen.begin(), seen.end(), q) == seen.end()) seen.push_back(q), s.ready.push_back(q);
    }
    if (s.kind == StepKind::conv_bf16_relu_pool) {
      const Conv2dShape sh = c.conv_shape(s.node);
      if (!s.dx[0] && cpu::choose(sh, cpu::ConvDir::relu_pool_backward_filter_bf16, p.isa, c.pool_k(s.node + 2)) !=
                          cpu::Algo::auto_)
        s.pool_bwd = PoolConvBackward::winners;
      else if (!cpu::conv2d_backward_sparse_dy_shape(sh, true) &&
               cpu::onednn::conv2d_backward_reads_nchw16c_dy(sh, true, s.dx[0]))
        s.pool_bwd = PoolConvBackward::nchw16c_dy;
      s.sparse_dy = cpu::conv2d_backward_sparse_dy_shape(sh, true);
    }
    if (device == Device::cpu) name_algos(c, s);
  }
  for (std::size_t j = p.steps.size(); j-- > 0;)  // backward order: the first to write a gradient sets it
    for (std::size_t k = 0; k < p.steps[j].in.size(); ++k) {
      Step& s = p.steps[j];
      if (!s.dx[k]) continue;
      s.accumulate[k] = written[std::size_t(s.in[k])];
      written[std::size_t(s.in[k])] = 1;
    }
  p.cast_input.assign(std::size_t(m.num_inputs()), 0);
  if (device == Device::cpu && dtype != DType::fp32) plan_autocast(m, p);  // fp32: no roundings
  return p;
}

}  // namespace dlb::models
