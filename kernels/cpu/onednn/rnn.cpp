// oneDNN's vanilla_rnn / lstm primitives behind our layer interface (see rnn.h). Per (shape, cell,
// layout): the forward and backward primitive descriptors with weights in format "any", built once
// per thread, plus the reorders between PyTorch's ldgoi weights and the primitives' layouts.
#include "kernels/cpu/onednn/rnn.h"

#include "kernels/common/errors.h"
#include "kernels/cpu/onednn/onednn.h"

#ifdef DLB_HAVE_ONEDNN
#include <omp.h>

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "kernels/cpu/onednn/internal.h"
#include "kernels/cpu/threads.h"
#endif

namespace dlb::cpu::onednn {

#ifndef DLB_HAVE_ONEDNN

void rnn_forward(const seq::RnnShape&, const seq::RnnWeights&, const float*, const float*, const float*, float*,
                 float*, float*, RnnSaved*) {
  throw Unsupported(unavailable_reason());
}
void rnn_backward(const seq::RnnShape&, const seq::RnnWeights&, const float*, const float*, const float*,
                  const float*, const RnnSaved&, float*, float*, float*, const seq::RnnGrads&) {
  throw Unsupported(unavailable_reason());
}

#else

namespace {
using namespace detail;
using tag = memory::format_tag;
using dt = memory::data_type;
constexpr auto kDir = dnnl::rnn_direction::unidirectional_left2right;

// The plain layouts: x, y [T, B, .] (tnc, or ntc for batch_first), states [1, 1, B, H], weights
// ldgoi (PyTorch's [G*H, in] as it stands), bias ldgo.
struct Plain {
  memory::desc x, y, iter, wl, wi, bias;
  explicit Plain(const seq::RnnShape& s) {
    const memory::dim T = s.T, B = s.B, I = s.I, H = s.H, G = s.gates();
    const tag layer = s.batch_first ? tag::ntc : tag::tnc;
    x = {{T, B, I}, dt::f32, layer}, y = {{T, B, H}, dt::f32, layer}, iter = {{1, 1, B, H}, dt::f32, tag::ldnc};
    wl = {{1, 1, I, G, H}, dt::f32, tag::ldgoi}, wi = {{1, 1, H, G, H}, dt::f32, tag::ldgoi};
    bias = {{1, 1, G, H}, dt::f32, tag::ldgo};
  }
  static memory::desc any(const memory::desc& d) { return {d.dims(), dt::f32, tag::any}; }
};

struct Entry {
  dnnl::primitive fwd, bwd;
  memory::desc ws;
  Tensor wl, wi, bwl, bwi, dwl, dwi;  // forward weights, backward weights, weight gradients
  std::string impl;
};

template <class Fwd, class Bwd>
void build(Entry& e, const Plain& p, typename Fwd::desc fd, const std::function<typename Bwd::desc()>& bd, bool train) {
  typename Fwd::primitive_desc fpd(fd, engine());
  e.fwd = Fwd(fpd);
  e.impl = fpd.impl_info_str();
  e.wl.init(p.wl, fpd.weights_layer_desc(), true);
  e.wi.init(p.wi, fpd.weights_iter_desc(), true);
  if (!train) return;
  e.ws = fpd.workspace_desc();
  typename Bwd::primitive_desc bpd(bd(), engine(), fpd);
  e.bwd = Bwd(bpd);
  e.bwl.init(p.wl, bpd.weights_layer_desc(), true);
  e.bwi.init(p.wi, bpd.weights_iter_desc(), true);
  e.dwl.init(p.wl, bpd.diff_weights_layer_desc(), false);
  e.dwi.init(p.wi, bpd.diff_weights_iter_desc(), false);
}

Entry& entry(const seq::RnnShape& s, bool train) {
  const bool lstm = s.cell == seq::RnnCell::lstm;
  const std::string key = std::string(lstm ? "lstm" : "vanilla_rnn") + (train ? " training" : " inference") +
                          " T" + std::to_string(s.T) + " B" + std::to_string(s.B) + " I" + std::to_string(s.I) +
                          " H" + std::to_string(s.H) + (s.batch_first ? " ntc" : " tnc");
  thread_local std::unordered_map<std::string, std::unique_ptr<Entry>> cache;
  auto& e = cache[key];
  if (!e) {
    auto fresh = std::make_unique<Entry>();
    build_guarded(key, [&] {
      const Plain p(s);
      const auto prop = train ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
      const auto wl = Plain::any(p.wl), wi = Plain::any(p.wi);
      if (lstm)
        build<dnnl::lstm_forward, dnnl::lstm_backward>(
            *fresh, p, {prop, kDir, p.x, p.iter, p.iter, wl, wi, p.bias, p.y, p.iter, p.iter},
            [&] {
              return dnnl::lstm_backward::desc(dnnl::prop_kind::backward, kDir, p.x, p.iter, p.iter, wl, wi, p.bias,
                                               p.y, p.iter, p.iter, p.x, p.iter, p.iter, wl, wi, p.bias, p.y, p.iter,
                                               p.iter);
            },
            train);
      else
        build<dnnl::vanilla_rnn_forward, dnnl::vanilla_rnn_backward>(
            *fresh, p, {prop, dnnl::algorithm::eltwise_tanh, kDir, p.x, p.iter, wl, wi, p.bias, p.y, p.iter},
            [&] {
              return dnnl::vanilla_rnn_backward::desc(dnnl::prop_kind::backward, dnnl::algorithm::eltwise_tanh, kDir,
                                                      p.x, p.iter, wl, wi, p.bias, p.y, p.iter, p.x, p.iter, wl, wi,
                                                      p.bias, p.y, p.iter);
            },
            train);
    });
    e = std::move(fresh);
  }
  note_impl(e->impl);
  return *e;
}

// oneDNN's team for the call: kernel_threads() (our pool's tasks set theirs to 1), restored after.
struct OmpTeam {
  int prev = omp_get_max_threads();
  OmpTeam() { omp_set_num_threads(kernel_threads()); }
  ~OmpTeam() { omp_set_num_threads(prev); }
};

memory mem(const memory::desc& d, const void* p) { return memory(d, engine(), const_cast<void*>(p)); }
const float* or_zeros(const float* p, std::vector<float>& zeros, std::size_t n) {
  if (p) return p;
  zeros.assign(n, 0.f);
  return zeros.data();
}
std::vector<float> bias_sum(const seq::RnnShape& s, const seq::RnnWeights& w) {
  std::vector<float> b(std::size_t(s.gates()) * s.H, 0.f);
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = (w.b_ih ? w.b_ih[k] : 0.f) + (w.b_hh ? w.b_hh[k] : 0.f);
  return b;
}
// A gradient output zeroed first (oneDNN's RNN backward accumulates into its diff weights).
memory zeroed_out(Tensor& t, void* user) {
  memory m = t.before(user, false);
  std::memset(m.get_data_handle(), 0, m.get_desc().get_size());
  return m;
}

}  // namespace

void rnn_forward(const seq::RnnShape& s, const seq::RnnWeights& w, const float* x, const float* h0, const float* c0,
                 float* y, float* hn, float* cn, RnnSaved* saved) {
  s.check();
  const bool lstm = s.cell == seq::RnnCell::lstm, train = saved != nullptr;
  const OmpTeam team;
  Entry& e = entry(s, train);
  const Plain p(s);
  const std::size_t BH = std::size_t(s.B) * s.H;
  RnnSaved local;
  RnnSaved& sv = saved ? *saved : local;
  sv.h0.assign(BH, 0.f), sv.c0.assign(BH, 0.f), sv.hn.resize(BH), sv.cn.resize(BH);
  if (h0) std::copy_n(h0, BH, sv.h0.begin());
  if (c0 && lstm) std::copy_n(c0, BH, sv.c0.begin());
  if (train) sv.workspace.resize(e.ws.get_size());
  const std::vector<float> bias = bias_sum(s, w);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, mem(p.x, x)},      {DNNL_ARG_SRC_ITER, mem(p.iter, sv.h0.data())},
      {DNNL_ARG_WEIGHTS_LAYER, e.wl.before(w.w_ih, true)}, {DNNL_ARG_WEIGHTS_ITER, e.wi.before(w.w_hh, true)},
      {DNNL_ARG_BIAS, mem(p.bias, bias.data())}, {DNNL_ARG_DST_LAYER, mem(p.y, y)},
      {DNNL_ARG_DST_ITER, mem(p.iter, sv.hn.data())}};
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = mem(p.iter, sv.c0.data());
    args[DNNL_ARG_DST_ITER_C] = mem(p.iter, sv.cn.data());
  }
  if (train) args[DNNL_ARG_WORKSPACE] = mem(e.ws, sv.workspace.data());
  e.fwd.execute(stream(), args);
  stream().wait();
  if (hn) std::copy(sv.hn.begin(), sv.hn.end(), hn);
  if (cn && lstm) std::copy(sv.cn.begin(), sv.cn.end(), cn);
  if (train) sv.y.assign(y, y + s.rows() * s.H);
}

void rnn_backward(const seq::RnnShape& s, const seq::RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const RnnSaved& saved, float* dx, float* dh0, float* dc0, const seq::RnnGrads& g) {
  s.check();
  if (saved.workspace.empty()) throw std::invalid_argument("onednn::rnn_backward: no training forward was saved");
  const bool lstm = s.cell == seq::RnnCell::lstm;
  const OmpTeam team;
  Entry& e = entry(s, true);
  const Plain p(s);
  const std::size_t BH = std::size_t(s.B) * s.H, GH = std::size_t(s.gates()) * s.H;
  std::vector<float> z_dy, z_dh, z_dc, o_dx(dx ? 0 : s.rows() * s.I), o_dh(BH), o_dc(BH), o_dwl, o_dwi, db(GH);
  if (!g.dw_ih) o_dwl.resize(GH * s.I);
  if (!g.dw_hh) o_dwi.resize(GH * s.H);
  const std::vector<float> bias = bias_sum(s, w);
  float* dwl = g.dw_ih ? g.dw_ih : o_dwl.data();
  float* dwi = g.dw_hh ? g.dw_hh : o_dwi.data();
  std::memset(db.data(), 0, GH * sizeof(float));
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, mem(p.x, x)},
      {DNNL_ARG_SRC_ITER, mem(p.iter, saved.h0.data())},
      {DNNL_ARG_WEIGHTS_LAYER, e.bwl.before(w.w_ih, true)},
      {DNNL_ARG_WEIGHTS_ITER, e.bwi.before(w.w_hh, true)},
      {DNNL_ARG_BIAS, mem(p.bias, bias.data())},
      {DNNL_ARG_DST_LAYER, mem(p.y, saved.y.data())},
      {DNNL_ARG_DST_ITER, mem(p.iter, saved.hn.data())},
      {DNNL_ARG_WORKSPACE, mem(e.ws, saved.workspace.data())},
      {DNNL_ARG_DIFF_SRC_LAYER, mem(p.x, dx ? dx : o_dx.data())},
      {DNNL_ARG_DIFF_SRC_ITER, mem(p.iter, o_dh.data())},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, zeroed_out(e.dwl, dwl)},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, zeroed_out(e.dwi, dwi)},
      {DNNL_ARG_DIFF_BIAS, mem(p.bias, db.data())},
      {DNNL_ARG_DIFF_DST_LAYER, mem(p.y, or_zeros(dy, z_dy, s.rows() * s.H))},
      {DNNL_ARG_DIFF_DST_ITER, mem(p.iter, or_zeros(dhn, z_dh, BH))}};
  if (lstm) {
    args[DNNL_ARG_SRC_ITER_C] = mem(p.iter, saved.c0.data());
    args[DNNL_ARG_DST_ITER_C] = mem(p.iter, saved.cn.data());
    args[DNNL_ARG_DIFF_SRC_ITER_C] = mem(p.iter, o_dc.data());
    args[DNNL_ARG_DIFF_DST_ITER_C] = mem(p.iter, or_zeros(dcn, z_dc, BH));
  }
  e.bwd.execute(stream(), args);
  e.dwl.after(dwl);
  e.dwi.after(dwi);
  stream().wait();
  if (dh0) std::copy(o_dh.begin(), o_dh.end(), dh0);
  if (dc0 && lstm) std::copy(o_dc.begin(), o_dc.end(), dc0);
  if (g.db_ih) std::copy(db.begin(), db.end(), g.db_ih);
  if (g.db_hh) std::copy(db.begin(), db.end(), g.db_hh);
}

#endif

}  // namespace dlb::cpu::onednn
