// MultiheadAttention (see multihead_attention.h): the projections as OpenBLAS GEMMs, the core as
// the attention kernels; the reference as plain fp64 loops over the kernels' reference core.
#include "models/layers/multihead_attention.h"

#include <cmath>

#include "kernels/common/errors.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/sgemm.h"
#include "models/layers/dropout.h"

namespace dlb::models {

namespace cs = cpu::seq;

MultiheadAttention::MultiheadAttention(std::string name, int E, int heads, Options o) : E(E), heads(heads), o(o) {
  if (E <= 0 || heads <= 0) throw UsageError(name + ": embedding size and heads must be positive");
  if (E % heads)
    throw InputError(name + ": embedding size " + std::to_string(E) + " is not a multiple of the " +
                     std::to_string(heads) + " heads");
  if (o.cross && !o.projections) throw UsageError(name + ": cross-attention needs its projections");
  if (!(o.dropout >= 0.f && o.dropout < 1.f)) throw UsageError(name + ": dropout must be in [0, 1)");
  in_w.name = name + ".in_proj_weight", in_b.name = name + ".in_proj_bias";
  out_w.name = name + ".out_proj.weight", out_b.name = name + ".out_proj.bias";
  if (!o.projections) return;
  in_w.resize({3 * E, E});
  in_b.resize({3 * E});
  out_w.resize({E, E});
  out_b.resize({E});
}

std::vector<Param*> MultiheadAttention::params() {
  if (!o.projections) return {};
  return {&in_w, &in_b, &out_w, &out_b};
}

void MultiheadAttention::init(std::uint64_t seed) {
  if (!o.projections) return;
  fill_uniform_bound(in_w.value.data(), in_w.size(), std::sqrt(6.f / float(E + 3 * E)), seed);  // xavier_uniform_
  const float out_bound = o.xavier_out ? std::sqrt(3.f / float(E)) : 1.f / std::sqrt(float(E));  // Linear's default
  fill_uniform_bound(out_w.value.data(), out_w.size(), out_bound, seed + 1);
  std::fill(in_b.value.begin(), in_b.value.end(), 0.f);
  std::fill(out_b.value.begin(), out_b.value.end(), 0.f);
}

Shape MultiheadAttention::out_shape(Shapes in) const {
  const Shape& x = in[0];
  const int width = o.projections ? E : 3 * E;
  if (x.rank() != 3 || x.last() != width)
    throw InputError(in_w.name.substr(0, in_w.name.rfind('.')) + ": expects [n, seq, " + std::to_string(width) +
                     "], got " + x.str());
  if (o.cross && (in[1].rank() != 3 || in[1].n() != x.n() || in[1].last() != E))
    throw InputError(in_w.name.substr(0, in_w.name.rfind('.')) + ": memory must be [" + std::to_string(x.n()) +
                     ", seq, " + std::to_string(E) + "], got " + in[1].str());
  return {x.n(), x[1], E};
}

cs::Attn MultiheadAttention::attn(Shapes in) const {
  cs::Attn a;
  a.B = in[0].n(), a.H = heads, a.Tq = in[0][1], a.Tk = o.cross ? in[1][1] : a.Tq, a.D = E / heads;
  a.causal = o.causal;
  if (training && o.dropout > 0) {
    const DropoutKey k = dropout_key(o.stream, step);
    a.dropout = o.dropout, a.seed = k.seed, a.offset = k.offset;
  }
  return a;
}

const cs::AttnAlgo& MultiheadAttention::algorithm(const cs::Attn& a) const {
  if (a.dropout > 0) return cs::attention_algo("unfused");
  if (algo != "auto") return cs::attention_algo(algo);
  return cs::attention_algo(a.causal ? "flash" : "unfused");
}

double MultiheadAttention::forward_flops(Shapes in) const {
  const double rq = double(in[0].n()) * in[0][1], rk = o.cross ? double(in[1].n()) * in[1][1] : rq;
  const double proj = o.projections ? 2.0 * E * E * (rq + 2 * rk) + 2.0 * E * E * rq : 0;
  return proj + attn(in).flops_forward();
}

namespace {
// y[m, cols] = x[m, k] W[cols, k]^T + b (W, b: `cols` rows of a bigger matrix from row r0 on); s16:
// the bf16 scratch (MultiheadAttention::bf16: the product on bf16 operands, fp32 sums), or null.
// The casts are exact for the bf16-valued input and weights autocast hands the layer; ctx and the
// inner gradients are rounded as PyTorch's bf16 ops hand them on.
void proj(const float* x, int m, int k, const Param& w, const Param& b, int r0, int cols, float* y,
          cpu::Bf16Scratch* s16) {
  const float* wr = w.value.data() + std::size_t(r0) * k;
  if (!s16) return cpu::sgemm_nt(m, cols, k, x, wr, y, b.value.data() + r0);
  cpu::dense_bf16_forward(m, cols, k, x, wr, y, *s16);
  cpu::bias_rows_forward(y, b.value.data() + r0, m, cols);
}
// Its backward: dW[r0.., :] += dy^T x, db += colsum(dy), dx = dy W (dx may be null).
void proj_back(const float* x, const float* dy, int m, int k, Param& w, Param& b, int r0, int cols, float* dx,
               cpu::Bf16Scratch* s16) {
  float* dw = w.grad.data() + std::size_t(r0) * k;
  const float* wr = w.value.data() + std::size_t(r0) * k;
  cpu::bias_rows_backward(dy, b.grad.data() + r0, m, cols);
  if (s16) return cpu::dense_bf16_backward(m, cols, k, x, wr, dy, dw, dx, *s16);
  cpu::sgemm_tn_add(cols, k, m, dy, x, dw);
  if (dx) cpu::sgemm_nn(m, k, cols, dy, wr, dx);
}
}  // namespace

void MultiheadAttention::forward(const Fwd<float>& a) {
  const cs::Attn at = attn(a.in);
  const int D = at.D, H = heads, mq = at.B * at.Tq, mk = at.B * at.Tk;
  const float *q, *k, *v;
  long ldq = 3L * E, ldkv = 3L * E;
  if (!o.projections) {
    q = a.x(), k = q + E, v = q + 2 * E;
    return algorithm(at).forward(at, cs::bthd(q, H, at.Tq, D, ldq), cs::bthd(k, H, at.Tk, D, ldkv),
                                 cs::bthd(v, H, at.Tk, D, ldkv), cs::bthd(a.y, H, at.Tq, D), saved_);
  }
  if (!o.cross) {
    qkv_.resize(std::size_t(mq) * 3 * E);
    proj(a.x(), mq, E, in_w, in_b, 0, 3 * E, qkv_.data(), s16());
    q = qkv_.data(), k = q + E, v = q + 2 * E;
  } else {
    qkv_.resize(std::size_t(mq) * E);
    kv_.resize(std::size_t(mk) * 2 * E);
    proj(a.x(0), mq, E, in_w, in_b, 0, E, qkv_.data(), s16());
    proj(a.x(1), mk, E, in_w, in_b, E, 2 * E, kv_.data(), s16());
    q = qkv_.data(), k = kv_.data(), v = k + E, ldq = E, ldkv = 2L * E;
  }
  ctx_.resize(std::size_t(mq) * E);
  algorithm(at).forward(at, cs::bthd(q, H, at.Tq, D, ldq), cs::bthd(k, H, at.Tk, D, ldkv),
                        cs::bthd(v, H, at.Tk, D, ldkv), cs::bthd(ctx_.data(), H, at.Tq, D), saved_);
  proj(ctx_.data(), mq, E, out_w, out_b, 0, E, a.y, s16());
}

void MultiheadAttention::backward(const Bwd<float>& a) {
  const cs::Attn at = attn(a.in);
  const int D = at.D, H = heads, mq = at.B * at.Tq, mk = at.B * at.Tk;
  const cs::AttnAlgo& alg = algorithm(at);
  if (!o.projections) {
    const float* q = a.x();
    float* dq = a.dx();
    if (!dq) dqkv_.resize(a.in[0].size()), dq = dqkv_.data();
    const long ld = 3L * E;
    alg.backward(at, cs::bthd(q, H, at.Tq, D, ld), cs::bthd(q + E, H, at.Tk, D, ld), cs::bthd(q + 2 * E, H, at.Tk, D, ld),
                 cs::bthd(static_cast<const float*>(a.y), H, at.Tq, D), cs::bthd(a.dy, H, at.Tq, D), saved_,
                 cs::bthd(dq, H, at.Tq, D, ld), cs::bthd(dq + E, H, at.Tk, D, ld), cs::bthd(dq + 2 * E, H, at.Tk, D, ld));
    return;
  }
  dctx_.resize(std::size_t(mq) * E);
  proj_back(ctx_.data(), a.dy, mq, E, out_w, out_b, 0, E, dctx_.data(), s16());
  const cs::CView o_view = cs::bthd(static_cast<const float*>(ctx_.data()), H, at.Tq, D);
  const cs::CView dout = cs::bthd(static_cast<const float*>(dctx_.data()), H, at.Tq, D);
  if (!o.cross) {
    const float* q = qkv_.data();
    dqkv_.resize(std::size_t(mq) * 3 * E);
    float* dq = dqkv_.data();
    const long ld = 3L * E;
    alg.backward(at, cs::bthd(q, H, at.Tq, D, ld), cs::bthd(q + E, H, at.Tk, D, ld), cs::bthd(q + 2 * E, H, at.Tk, D, ld),
                 o_view, dout, saved_, cs::bthd(dq, H, at.Tq, D, ld), cs::bthd(dq + E, H, at.Tk, D, ld),
                 cs::bthd(dq + 2 * E, H, at.Tk, D, ld));
    proj_back(a.x(), dq, mq, E, in_w, in_b, 0, 3 * E, a.dx(), s16());
    return;
  }
  const float *q = qkv_.data(), *k = kv_.data();
  dqkv_.resize(std::size_t(mq) * E);
  dkv_.resize(std::size_t(mk) * 2 * E);
  float *dq = dqkv_.data(), *dk = dkv_.data();
  alg.backward(at, cs::bthd(q, H, at.Tq, D, E), cs::bthd(k, H, at.Tk, D, 2L * E), cs::bthd(k + E, H, at.Tk, D, 2L * E),
               o_view, dout, saved_, cs::bthd(dq, H, at.Tq, D, E), cs::bthd(dk, H, at.Tk, D, 2L * E),
               cs::bthd(dk + E, H, at.Tk, D, 2L * E));
  proj_back(a.x(0), dq, mq, E, in_w, in_b, 0, E, a.dx(0), s16());
  proj_back(a.x(1), dk, mk, E, in_w, in_b, E, 2 * E, a.dx(1), s16());
}

// ---- the fp64 reference (stateless: backward recomputes the projections) ----

namespace {
using DView = cs::HeadsView<const double>;
void proj_ref(const double* x, int m, int k, const Param& w, const Param& b, int r0, int cols, double* y) {
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < cols; ++c) {
      double s = b.ref_value[std::size_t(r0 + c)];
      for (int j = 0; j < k; ++j) s += x[std::size_t(i) * k + j] * w.ref_value[std::size_t(r0 + c) * k + j];
      y[std::size_t(i) * cols + c] = s;
    }
}
void proj_back_ref(const double* x, const double* dy, int m, int k, Param& w, Param& b, int r0, int cols, double* dx) {
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < cols; ++c) {
      const double g = dy[std::size_t(i) * cols + c];
      b.ref_grad[std::size_t(r0 + c)] += g;
      for (int j = 0; j < k; ++j) w.ref_grad[std::size_t(r0 + c) * k + j] += g * x[std::size_t(i) * k + j];
    }
  if (!dx) return;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < k; ++j) {
      double s = 0;
      for (int c = 0; c < cols; ++c) s += dy[std::size_t(i) * cols + c] * w.ref_value[std::size_t(r0 + c) * k + j];
      dx[std::size_t(i) * k + j] = s;
    }
}
// Q, K, V for the reference: one [m, 3E] buffer (self) or [mq, E] and [mk, 2E] (cross), as forward.
struct RefQkv {
  std::vector<double> q, kv;
  DView vq, vk, vv;
};
}  // namespace

void MultiheadAttention::forward_ref(const Fwd<double>& a) {
  const cs::Attn at = attn(a.in);
  const int D = at.D, H = heads, mq = at.B * at.Tq, mk = at.B * at.Tk;
  if (!o.projections) {
    const double* q = a.x();
    return cs::attention_forward_ref(at, cs::bthd(q, H, at.Tq, D, 3L * E), cs::bthd(q + E, H, at.Tk, D, 3L * E),
                                     cs::bthd(q + 2 * E, H, at.Tk, D, 3L * E), cs::bthd(a.y, H, at.Tq, D));
  }
  std::vector<double> qkv, kv, ctx(std::size_t(mq) * E);
  if (!o.cross) {
    qkv.resize(std::size_t(mq) * 3 * E);
    proj_ref(a.x(), mq, E, in_w, in_b, 0, 3 * E, qkv.data());
    const double* q = qkv.data();
    cs::attention_forward_ref(at, cs::bthd(q, H, at.Tq, D, 3L * E), cs::bthd(q + E, H, at.Tk, D, 3L * E),
                              cs::bthd(q + 2 * E, H, at.Tk, D, 3L * E), cs::bthd(ctx.data(), H, at.Tq, D));
  } else {
    qkv.resize(std::size_t(mq) * E), kv.resize(std::size_t(mk) * 2 * E);
    proj_ref(a.x(0), mq, E, in_w, in_b, 0, E, qkv.data());
    proj_ref(a.x(1), mk, E, in_w, in_b, E, 2 * E, kv.data());
    const double *q = qkv.data(), *k = kv.data();
    cs::attention_forward_ref(at, cs::bthd(q, H, at.Tq, D, long(E)), cs::bthd(k, H, at.Tk, D, 2L * E),
                              cs::bthd(k + E, H, at.Tk, D, 2L * E), cs::bthd(ctx.data(), H, at.Tq, D));
  }
  proj_ref(ctx.data(), mq, E, out_w, out_b, 0, E, a.y);
}

void MultiheadAttention::backward_ref(const Bwd<double>& a) {
  const cs::Attn at = attn(a.in);
  const int D = at.D, H = heads, mq = at.B * at.Tq, mk = at.B * at.Tk;
  if (!o.projections) {
    const double* q = a.x();
    std::vector<double> scratch(a.dx() ? 0 : a.in[0].size());
    double* dq = a.dx() ? a.dx() : scratch.data();
    const long ld = 3L * E;
    cs::attention_backward_ref(at, cs::bthd(q, H, at.Tq, D, ld), cs::bthd(q + E, H, at.Tk, D, ld),
                               cs::bthd(q + 2 * E, H, at.Tk, D, ld), cs::bthd(a.dy, H, at.Tq, D),
                               cs::bthd(dq, H, at.Tq, D, ld), cs::bthd(dq + E, H, at.Tk, D, ld),
                               cs::bthd(dq + 2 * E, H, at.Tk, D, ld));
    return;
  }
  // forward again: the projections and the context
  const bool x = o.cross;
  const long ldq = x ? E : 3L * E, ldkv = x ? 2L * E : 3L * E;
  std::vector<double> qb(std::size_t(mq) * ldq), kvb(x ? std::size_t(mk) * 2 * E : 0), ctx(std::size_t(mq) * E);
  if (!x) proj_ref(a.x(), mq, E, in_w, in_b, 0, 3 * E, qb.data());
  else proj_ref(a.x(0), mq, E, in_w, in_b, 0, E, qb.data()), proj_ref(a.x(1), mk, E, in_w, in_b, E, 2 * E, kvb.data());
  const double* q = qb.data();
  const double* k = x ? kvb.data() : q + E;
  const double* v = x ? kvb.data() + E : q + 2 * E;
  cs::attention_forward_ref(at, cs::bthd(q, H, at.Tq, D, ldq), cs::bthd(k, H, at.Tk, D, ldkv),
                            cs::bthd(v, H, at.Tk, D, ldkv), cs::bthd(ctx.data(), H, at.Tq, D));
  std::vector<double> dctx(std::size_t(mq) * E), dq(qb.size()), dkv(x ? kvb.size() : 0);
  proj_back_ref(ctx.data(), a.dy, mq, E, out_w, out_b, 0, E, dctx.data());
  double* dk = x ? dkv.data() : dq.data() + E;
  double* dv = x ? dkv.data() + E : dq.data() + 2 * E;
  cs::attention_backward_ref(at, cs::bthd(q, H, at.Tq, D, ldq), cs::bthd(k, H, at.Tk, D, ldkv),
                             cs::bthd(v, H, at.Tk, D, ldkv), cs::bthd(static_cast<const double*>(dctx.data()), H, at.Tq, D),
                             cs::bthd(dq.data(), H, at.Tq, D, ldq), cs::bthd(dk, H, at.Tk, D, ldkv),
                             cs::bthd(dv, H, at.Tk, D, ldkv));
  if (!x) return proj_back_ref(a.x(), dq.data(), mq, E, in_w, in_b, 0, 3 * E, a.dx());
  proj_back_ref(a.x(0), dq.data(), mq, E, in_w, in_b, 0, E, a.dx(0));
  proj_back_ref(a.x(1), dkv.data(), mk, E, in_w, in_b, E, 2 * E, a.dx(1));
}

}  // namespace dlb::models
