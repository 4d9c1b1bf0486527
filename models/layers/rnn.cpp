// Recurrent (see rnn.h): per layer one call of the recurrent kernels (ours or oneDNN's) or of their
// fp64 reference, layer k's output feeding layer k + 1.
#include "models/layers/rnn.h"

#include <algorithm>
#include <cmath>

#include "kernels/common/errors.h"

namespace dlb::models {

namespace cs = cpu::seq;

RnnImpl parse_rnn_impl(const std::string& s) {
  if (s == "ours") return RnnImpl::ours;
  if (s == "onednn") return RnnImpl::onednn;
  if (s == "cudnn") return RnnImpl::cudnn;
  throw UsageError("recurrent impl '" + s + "': expected ours, onednn or cudnn");
}

const char* rnn_impl_name(RnnImpl i) { return i == RnnImpl::onednn ? "onednn" : i == RnnImpl::cudnn ? "cudnn" : "ours"; }

namespace {
void check_cpu_impl(RnnImpl i, const std::string& name) {
  if (i == RnnImpl::cudnn) throw Unsupported(name + ": impl cudnn runs on the GPU only (the CUDA trainer)");
}
}  // namespace

Recurrent::Recurrent(std::string name, cs::RnnCell cell, int input, int hidden, int layers, bool batch_first,
                     bool state)
    : cell(cell), input(input), hidden(hidden), layers(layers), batch_first(batch_first), state(state) {
  if (input <= 0 || hidden <= 0 || layers <= 0)
    throw UsageError(name + ": input, hidden size and layers must be positive");
  const int G = cell == cs::RnnCell::lstm ? 4 : 1;
  p.resize(std::size_t(4 * layers));
  for (int k = 0; k < layers; ++k) {
    const std::string l = "_l" + std::to_string(k);
    Param* q = &p[std::size_t(4 * k)];
    q[0].name = name + ".weight_ih" + l, q[1].name = name + ".weight_hh" + l;
    q[2].name = name + ".bias_ih" + l, q[3].name = name + ".bias_hh" + l;
    q[0].resize({G * hidden, k ? hidden : input});
    q[1].resize({G * hidden, hidden});
    q[2].resize({G * hidden});
    q[3].resize({G * hidden});
  }
}

std::vector<Param*> Recurrent::params() {
  std::vector<Param*> v;
  for (Param& q : p) v.push_back(&q);
  return v;
}

void Recurrent::init(std::uint64_t seed) {
  const float bound = 1.f / std::sqrt(float(hidden));
  for (Param& q : p) fill_uniform_bound(q.value.data(), q.size(), bound, seed++);
}

Shape Recurrent::out_shape(Shapes in) const {
  const Shape& x = in[0];
  const std::string& name = p[0].name;
  if (x.rank() != 3 || x.last() != input)
    throw InputError(name + ": expects [n, seq, " + std::to_string(input) + "], got " + x.str());
  for (int k = 1; k < in.count; ++k)
    if (in[k] != Shape{x.n(), layers, hidden})
      throw InputError(name + ": initial state " + std::to_string(k) + " must be [n, layers, hidden] = " +
                       Shape{x.n(), layers, hidden}.str() + ", got " + in[k].str());
  return {x.n(), x[1], hidden};
}

double Recurrent::forward_flops(Shapes in) const {
  const double rows = double(in[0].n()) * in[0][1], G = cell == cs::RnnCell::lstm ? 4 : 1;
  double f = 0;
  for (int k = 0; k < layers; ++k) f += 2.0 * rows * G * hidden * ((k ? hidden : input) + hidden);
  return f;
}

cs::RnnShape Recurrent::shape(int k, int n, int T) const {
  cs::RnnShape s;
  s.cell = cell, s.T = T, s.B = n, s.I = k ? hidden : input, s.H = hidden, s.batch_first = batch_first, s.bf16 = bf16;
  return s;
}

cs::RnnWeights Recurrent::weights(int k) const {
  const Param* q = &p[std::size_t(4 * k)];
  return {q[0].value.data(), q[1].value.data(), q[2].value.data(), q[3].value.data()};
}

namespace {
// Layer k's [n, H] rows of a [n, layers, H] state (gather), and back (scatter).
template <class T>
void state_rows(const T* s, int n, int layers, int H, int k, T* out) {
  for (int b = 0; b < n; ++b) std::copy_n(s + (std::size_t(b) * layers + k) * H, H, out + std::size_t(b) * H);
}
template <class T>
void state_put(const T* rows, int n, int layers, int H, int k, T* s) {
  for (int b = 0; b < n; ++b) std::copy_n(rows + std::size_t(b) * H, H, s + (std::size_t(b) * layers + k) * H);
}
}  // namespace

void Recurrent::forward(const Fwd<float>& a) {
  const int n = a.in[0].n(), T = a.in[0][1], H = hidden;
  const bool lstm = cell == cs::RnnCell::lstm;
  const std::size_t BH = std::size_t(n) * H, N = std::size_t(n) * T;
  check_cpu_impl(impl, p[0].name);
  saved_.resize(std::size_t(layers));
  saved_dnn_.resize(impl == RnnImpl::onednn ? std::size_t(layers) : 0);
  ys_.resize(std::size_t(layers - 1));
  h0_.resize(BH), c0_.resize(BH);
  const float* x = a.x(0);
  for (int k = 0; k < layers; ++k) {
    const cs::RnnShape s = shape(k, n, T);
    float* y = a.y;
    if (k + 1 < layers) ys_[std::size_t(k)].resize(N * H), y = ys_[std::size_t(k)].data();
    const float *h0 = nullptr, *c0 = nullptr;
    if (state) {
      state_rows(a.x(1), n, layers, H, k, h0_.data()), h0 = h0_.data();
      if (lstm) state_rows(a.x(2), n, layers, H, k, c0_.data()), c0 = c0_.data();
    }
    if (impl == RnnImpl::onednn)
      cpu::onednn::rnn_forward(s, weights(k), x, h0, c0, y, nullptr, nullptr, &saved_dnn_[std::size_t(k)]);
    else
      cs::rnn_forward(s, weights(k), x, h0, c0, y, nullptr, nullptr, saved_[std::size_t(k)]);
    x = y;
  }
}

void Recurrent::backward(const Bwd<float>& a) {
  const int n = a.in[0].n(), T = a.in[0][1], H = hidden;
  const bool lstm = cell == cs::RnnCell::lstm;
  const std::size_t BH = std::size_t(n) * H, N = std::size_t(n) * T;
  const float* dy = a.dy;
  check_cpu_impl(impl, p[0].name);
  dh_.resize(BH), dc_.resize(BH);
  for (int k = layers - 1; k >= 0; --k) {
    const cs::RnnShape s = shape(k, n, T);
    const float* x = k ? ys_[std::size_t(k - 1)].data() : a.x(0);
    // dx of layer k > 0 is the dy of layer k - 1 (ping-pong between two buffers)
    float* dx = k ? nullptr : a.dx(0);
    if (k) {
      std::vector<float>& buf = dbuf_[(layers - 1 - k) % 2];
      buf.resize(N * H);
      dx = buf.data();
    }
    Param* q = &p[std::size_t(4 * k)];
    const bool want_state = state && a.dx(1);
    float* dh0 = want_state ? dh_.data() : nullptr;
    float* dc0 = want_state && lstm && a.dx(2) ? dc_.data() : nullptr;
    if (impl == RnnImpl::onednn) {  // into scratch (overwritten), then added
      g_.resize(q[0].size() + q[1].size() + q[2].size());
      float* gw = g_.data();
      const cs::RnnGrads g{gw, gw + q[0].size(), gw + q[0].size() + q[1].size(), nullptr};
      cpu::onednn::rnn_backward(s, weights(k), x, dy, nullptr, nullptr, saved_dnn_[std::size_t(k)], dx, dh0, dc0, g);
      add_into(q[0].grad.data(), g.dw_ih, q[0].size());
      add_into(q[1].grad.data(), g.dw_hh, q[1].size());
      add_into(q[2].grad.data(), g.db_ih, q[2].size());
      add_into(q[3].grad.data(), g.db_ih, q[3].size());  // db_hh == db_ih
    } else {
      const cs::RnnGrads g{q[0].grad.data(), q[1].grad.data(), q[2].grad.data(), q[3].grad.data(), true};
      cs::rnn_backward(s, weights(k), x, dy, nullptr, nullptr, saved_[std::size_t(k)], dx, dh0, dc0, g);
    }
    if (dh0) state_put(dh0, n, layers, H, k, a.dx(1));
    if (dc0) state_put(dc0, n, layers, H, k, a.dx(2));
    dy = dx;
  }
}

// ---- the fp64 reference: the layers' outputs recomputed in backward (no state kept) ----

namespace {
cs::RnnWeightsRef ref_weights(const Param* q) {
  return {q[0].ref_value.data(), q[1].ref_value.data(), q[2].ref_value.data(), q[3].ref_value.data()};
}
}  // namespace

void Recurrent::forward_ref(const Fwd<double>& a) {
  const int n = a.in[0].n(), T = a.in[0][1], H = hidden;
  const std::size_t BH = std::size_t(n) * H, N = std::size_t(n) * T;
  std::vector<double> h0(BH), c0(BH), cur, next;
  const double* x = a.x(0);
  for (int k = 0; k < layers; ++k) {
    double* y = a.y;
    if (k + 1 < layers) next.assign(N * H, 0.0), y = next.data();
    if (state) {
      state_rows(a.x(1), n, layers, H, k, h0.data());
      if (cell == cs::RnnCell::lstm) state_rows(a.x(2), n, layers, H, k, c0.data());
    }
    cs::rnn_forward_ref(shape(k, n, T), ref_weights(&p[std::size_t(4 * k)]), x, state ? h0.data() : nullptr,
                        state && cell == cs::RnnCell::lstm ? c0.data() : nullptr, y, nullptr, nullptr);
    cur.swap(next);
    x = cur.data();
  }
}

void Recurrent::backward_ref(const Bwd<double>& a) {
  const int n = a.in[0].n(), T = a.in[0][1], H = hidden;
  const bool lstm = cell == cs::RnnCell::lstm;
  const std::size_t BH = std::size_t(n) * H, N = std::size_t(n) * T;
  const auto L = std::size_t(layers);
  std::vector<std::vector<double>> xs(L), h0(L), c0(L);
  // the layers' inputs and initial states again
  for (int k = 0; k < layers; ++k) {
    h0[std::size_t(k)].assign(BH, 0.0), c0[std::size_t(k)].assign(BH, 0.0);
    if (state) {
      state_rows(a.x(1), n, layers, H, k, h0[std::size_t(k)].data());
      if (lstm) state_rows(a.x(2), n, layers, H, k, c0[std::size_t(k)].data());
    }
    if (k == 0) continue;
    xs[std::size_t(k)].assign(N * H, 0.0);
    const double* x = k == 1 ? a.x(0) : xs[std::size_t(k - 1)].data();
    cs::rnn_forward_ref(shape(k - 1, n, T), ref_weights(&p[std::size_t(4 * (k - 1))]), x, h0[std::size_t(k - 1)].data(),
                        c0[std::size_t(k - 1)].data(), xs[std::size_t(k)].data(), nullptr, nullptr);
  }
  std::vector<double> dy(a.dy, a.dy + N * H), dx, dh0(BH), dc0(BH);
  for (int k = layers - 1; k >= 0; --k) {
    Param* q = &p[std::size_t(4 * k)];
    std::vector<double> gw(q[0].size()), gh(q[1].size()), gb(q[2].size());
    const double* x = k ? xs[std::size_t(k)].data() : a.x(0);
    double* dxp = k ? (dx.assign(N * H, 0.0), dx.data()) : a.dx(0);
    cs::rnn_backward_ref(shape(k, n, T), ref_weights(q), x, h0[std::size_t(k)].data(), c0[std::size_t(k)].data(),
                         dy.data(), nullptr, nullptr, dxp, dh0.data(), dc0.data(), {gw.data(), gh.data(), gb.data(), nullptr});
    for (std::size_t i = 0; i < gw.size(); ++i) q[0].ref_grad[i] += gw[i];
    for (std::size_t i = 0; i < gh.size(); ++i) q[1].ref_grad[i] += gh[i];
    for (std::size_t i = 0; i < gb.size(); ++i) q[2].ref_grad[i] += gb[i], q[3].ref_grad[i] += gb[i];
    if (state && a.dx(1)) state_put(dh0.data(), n, layers, H, k, a.dx(1));
    if (state && lstm && a.dx(2)) state_put(dc0.data(), n, layers, H, k, a.dx(2));
    if (k) dy.swap(dx);
  }
}

}  // namespace dlb::models
