// oneDNN backend (see onednn.h). Each cached entry holds a primitive built with format "any" (so
// oneDNN picks its blocked layouts and fastest kernel) plus the reorders between the callers' plain
// layouts and those; an entry runs: input reorders, the primitive, output reorders.
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/onednn/internal.h"

#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/memcpy.h"
#include "kernels/cpu/threads.h"

#ifdef DLB_HAVE_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>

#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>
#endif

namespace dlb::cpu::onednn {

#ifndef DLB_HAVE_ONEDNN

bool available() { return false; }
std::string unavailable_reason() { return "dlbench was built without oneDNN (install libdnnl-dev and rebuild)"; }
std::string version() { return ""; }
std::string isa() { return ""; }
bool bf16_native() { return false; }
void gemm(const Gemm&) { throw Unsupported(unavailable_reason()); }
void conv2d_forward(const Conv2dShape&, Dt, const void*, const void*, const float*, float*) {
  throw Unsupported(unavailable_reason());
}
void conv2d_backward_data(const Conv2dShape&, Dt, const void*, const void*, float*) {
  throw Unsupported(unavailable_reason());
}
bool conv2d_forward_bf16_nchw16c(const Conv2dShape&, const float*, const float*, const float*, std::uint16_t*) {
  return false;
}
bool conv2d_backward_bf16_nchw16c_dy(const Conv2dShape&, const float*, const float*, const std::uint16_t*, float*, float*,
                                     float*) {
  return false;
}
bool conv2d_backward_reads_nchw16c_dy(const Conv2dShape&, bool, bool) { return false; }
bool conv2d_forward_bf16_nchw16c_src(const Conv2dShape&, const std::uint16_t*, const float*, const float*,
                                     std::uint16_t*) {
  return false;
}
bool conv2d_forward_reads_nchw16c_src(const Conv2dShape&, bool) { return false; }
bool conv2d_forward_writes_nchw16c(const Conv2dShape&, bool) { return false; }
void conv2d_backward_filter(const Conv2dShape&, Dt, const void*, const void*, float*, float*) {
  throw Unsupported(unavailable_reason());
}
std::string last_impl() { return ""; }

#else

namespace detail {

dnnl::engine& engine() {
  static dnnl::engine* e = [] {
    try {  // before any primitive: oneDNN's ISA ceiling = ours (fails only if oneDNN already ran)
      dnnl::set_max_cpu_isa(static_cast<dnnl::cpu_isa>(
          isa_cap() == Isa::scalar ? dnnl::cpu_isa::sse41
          : isa_cap() == Isa::avx2 ? dnnl::cpu_isa::avx2
          : isa_cap() == Isa::avx512 ? dnnl::cpu_isa::avx512_core
                                     : dnnl::cpu_isa::avx512_core_bf16));
    } catch (const dnnl::error&) {
    }
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

}  // namespace detail

namespace {

using namespace detail;
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

std::mutex g_impl_mu;
std::string g_last_impl;  // the last call's implementation, from whichever thread ran it

// The type oneDNN computes in, and the type of the caller's input arrays.
dt to_dnnl(Dt d) { return d == Dt::f32 ? dt::f32 : dt::bf16; }
dt user_dt(Dt d) { return d == Dt::bf16 ? dt::bf16 : dt::f32; }
// A convolution's forward / backward-data output inside oneDNN: bf16 under f32_as_bf16 (rounded
// there, widened by the output reorder), fp32 otherwise.
dt conv_out_dt(Dt d) { return d == Dt::f32_as_bf16 ? dt::bf16 : dt::f32; }
const char* dt_name(Dt d) { return d == Dt::f32 ? "fp32" : d == Dt::bf16 ? "bf16" : "f32>bf16"; }

struct Entry {
  dnnl::primitive prim;
  std::string impl;
  Tensor t[4];  // per kind: see the callers
};

// A call's weights reordered once into the layout its parts' primitives read, shared by the parts
// (read-only in their tasks): one reorder per call instead of one per 8-image part (the autoencoder's
// 64x32x7x7 filters took 0.13 ms a reorder, 48 a step). Empty: each part reorders for itself.
struct Weights {
  memory::desc prim;
  std::vector<char> buf;
};
// The weights argument of a part's primitive: the shared copy where its layout is the one wanted.
memory weights_arg(Tensor& t, const void* w, const Weights* sw) {
  if (sw && !sw->buf.empty() && t.prim == sw->prim) return memory(t.prim, engine(), const_cast<char*>(sw->buf.data()));
  return t.before(w, true);
}

// Under `ulimit -v`, oneDNN 2.6 crashes (a null write) when the mapping for a JIT kernel it generates
// is refused, where it fails cleanly for a refused data buffer. A first call takes ~6 MiB per thread
// (kernels and gemm packing buffers, measured at 64..2048); a new primitive is built only with
// 16 MiB per thread left, else refused as out of memory before oneDNN runs.
constexpr std::size_t kRoomPerThread = std::size_t(16) << 20;

}  // namespace

void detail::build_guarded(const std::string& key, const std::function<void()>& make) {
  // The other kernel threads may be building theirs at the same moment.
  require_address_space(std::size_t(std::max(kernel_threads(), omp_get_max_threads())) * kRoomPerThread,
                        "oneDNN (a new primitive's JIT kernels and buffers)");
  try {
    make();
  } catch (const dnnl::error& err) {
    if (err.status == dnnl_out_of_memory) throw OutOfMemory(std::string("oneDNN: ") + key + ": " + err.what());
    throw Unsupported(std::string("oneDNN ") + version() + " has no " + key + " at ISA " + isa() + " (" + err.what() +
                      ")");
  }
}

void detail::note_impl(const std::string& impl) {
  std::lock_guard<std::mutex> lk(g_impl_mu);
  g_last_impl = impl;
}

namespace {

Entry& cached(const std::string& key, const std::function<void(Entry&)>& make) {
  thread_local std::unordered_map<std::string, std::unique_ptr<Entry>> cache;
  auto& e = cache[key];
  if (!e) {
    auto fresh = std::make_unique<Entry>();
    build_guarded(key, [&] { make(*fresh); });
    e = std::move(fresh);
  }
  note_impl(e->impl);
  return *e;
}

memory::dims mat_strides(bool trans, long ld) { return trans ? memory::dims{1, ld} : memory::dims{ld, 1}; }

struct ConvDescs {
  memory::dims x, w, y, b, strides, pad_l, pad_r;
};
ConvDescs conv_dims(const Conv2dShape& s) {
  ConvDescs d;
  d.x = {s.n, s.c, s.h, s.w};
  d.w = {s.k, s.c, s.r, s.s};
  d.y = {s.n, s.k, s.p(), s.q()};
  d.b = {s.k};
  d.strides = {s.stride_h, s.stride_w};
  d.pad_l = {s.pad_h, s.pad_w};
  // right padding so that the output is exactly p x q (floor mode, as PyTorch)
  d.pad_r = {(s.p() - 1) * s.stride_h + s.r - s.h - s.pad_h, (s.q() - 1) * s.stride_w + s.s - s.w - s.pad_w};
  return d;
}

std::string conv_key(const char* what, const Conv2dShape& sh, Dt d, bool bias) {
  return std::string(what) + " " + dt_name(d) + " " + sh.str() + (bias ? " +bias" : "");
}

dnnl::convolution_forward::primitive_desc conv_fwd_pd(const Conv2dShape& sh, Dt d, bool bias) {
  const ConvDescs cd = conv_dims(sh);
  const dt in = to_dnnl(d);
  const memory::desc x(cd.x, in, tag::any), w(cd.w, in, tag::any), y(cd.y, conv_out_dt(d), tag::any),
      b(cd.b, dt::f32, tag::a);
  const auto desc = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                           dnnl::algorithm::convolution_direct, x, w, b, y,
                                                           cd.strides, cd.pad_l, cd.pad_r)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                           dnnl::algorithm::convolution_direct, x, w, y, cd.strides,
                                                           cd.pad_l, cd.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, engine());
}

}  // namespace

bool available() { return true; }
std::string unavailable_reason() { return ""; }

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string isa() {
  engine();  // the cap is applied first
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

bool bf16_native() {
  const std::string i = isa();
  return i == "avx512_core_bf16" || i == "avx512_core_amx";
}

std::string last_impl() {
  std::lock_guard<std::mutex> lk(g_impl_mu);
  return g_last_impl;
}

namespace {
void gemm_one(const Gemm& g) {
  const long lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k), ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n),
             ldc = g.ldc ? g.ldc : g.n;
  std::ostringstream key;
 key << "matmul " << dt_name(g.dt) << " " << g.m << "x" << g.n << "x" << g.k << " t"
      << g.trans_a << g.trans_b << " ld" << lda << "," << ldb << "," << ldc << " beta" << g.beta << " bias"
      << (g.bias != nullptr);
  Entry& e = cached(key.str(), [&](Entry& e) {
    const memory::desc a({g.m, g.k}, user_dt(g.dt), mat_strides(g.trans_a, lda)),
        b({g.k, g.n}, user_dt(g.dt), mat_strides(g.trans_b, ldb)), c({g.m, g.n}, dt::f32, memory::dims{ldc, 1});
    // The primitive's own operands: bf16 under f32_as_bf16 (the reorders convert), else the caller's.
    const memory::desc pa({g.m, g.k}, to_dnnl(g.dt), mat_strides(g.trans_a, lda)),
        pb({g.k, g.n}, to_dnnl(g.dt), mat_strides(g.trans_b, ldb));
    dnnl::primitive_attr attr;
    if (g.beta != 0.0f) {
      dnnl::post_ops po;
      po.append_sum(g.beta);
      attr.set_post_ops(po);
    }
    const memory::desc bias({1, g.n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(
        g.bias ? dnnl::matmul::desc(pa, pb, bias, c) : dnnl::matmul::desc(pa, pb, c), attr, engine());
    e.prim = dnnl::matmul(pd);
    e.impl = pd.impl_info_str();
    e.t[0].init(a, pd.src_desc(), true);
    e.t[1].init(b, pd.weights_desc(), true);
    e.t[2].init(c, pd.dst_desc(), false);
  });
  memory ma = e.t[0].before(g.a, true), mb = e.t[1].before(g.b, true), mc = e.t[2].before(g.c, true);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (g.bias)
    args.emplace(DNNL_ARG_BIAS, memory({{1, g.n}, dt::f32, tag::ab}, engine(), const_cast<float*>(g.bias)));
  e.prim.execute(stream(), args);
  e.t[2].after(g.c);
  stream().wait();
}

Entry& conv_fwd_entry(const Conv2dShape& sh, Dt d, const float* bias) {
  return cached(conv_key("conv fwd", sh, d, bias), [&](Entry& e) {
    const auto pd = conv_fwd_pd(sh, d, bias);
    const ConvDescs cd = conv_dims(sh);
    e.prim = dnnl::convolution_forward(pd);
    e.impl = pd.impl_info_str();
    e.t[0].init(memory::desc(cd.x, user_dt(d), tag::nchw), pd.src_desc(), true);
    e.t[1].init(memory::desc(cd.w, user_dt(d), tag::oihw), pd.weights_desc(), true);
    e.t[2].init(memory::desc(cd.y, dt::f32, tag::nchw), pd.dst_desc(), false);
  });
}

void conv2d_forward_one(const Conv2dShape& sh, Dt d, const void* x, const void* w, const float* bias, float* y,
                        const Weights* sw = nullptr) {
  Entry& e = conv_fwd_entry(sh, d, bias);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.t[0].before(x, true)},
                                       {DNNL_ARG_WEIGHTS, weights_arg(e.t[1], w, sw)},
                                       {DNNL_ARG_DST, e.t[2].before(y, false)}};
  if (bias) args[DNNL_ARG_BIAS] = memory(memory::desc({sh.k}, dt::f32, tag::a), engine(), const_cast<float*>(bias));
  e.prim.execute(stream(), args);
  e.t[2].after(y);
  stream().wait();
}

// Dt::f32_as_bf16 forward writing oneDNN's own bf16 nChw16c output straight into y16 (no reorder).
void conv2d_forward_one_nchw16c(const Conv2dShape& sh, const float* x, const float* w, const float* bias,
                                std::uint16_t* y16, const Weights* sw = nullptr) {
  Entry& e = conv_fwd_entry(sh, Dt::f32_as_bf16, bias);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.t[0].before(x, true)},
                                       {DNNL_ARG_WEIGHTS, weights_arg(e.t[1], w, sw)},
                                       {DNNL_ARG_DST, memory(e.t[2].prim, engine(), y16)}};
  if (bias) args[DNNL_ARG_BIAS] = memory(memory::desc({sh.k}, dt::f32, tag::a), engine(), const_cast<float*>(bias));
  e.prim.execute(stream(), args);
  stream().wait();
}

// The same with x given as bf16 in nChw16c too (the primitive's own src layout: no input reorder).
void conv2d_forward_one_nchw16c_src(const Conv2dShape& sh, const std::uint16_t* x16, const float* w, const float* bias,
                                    std::uint16_t* y16, const Weights* sw = nullptr) {
  Entry& e = conv_fwd_entry(sh, Dt::f32_as_bf16, bias);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(e.t[0].prim, engine(), const_cast<std::uint16_t*>(x16))},
                                       {DNNL_ARG_WEIGHTS, weights_arg(e.t[1], w, sw)},
                                       {DNNL_ARG_DST, memory(e.t[2].prim, engine(), y16)}};
  if (bias) args[DNNL_ARG_BIAS] = memory(memory::desc({sh.k}, dt::f32, tag::a), engine(), const_cast<float*>(bias));
  e.prim.execute(stream(), args);
  stream().wait();
}

// ask(): oneDNN's answer to a layout question about one shape, asked once per key (building
// primitive descriptors costs more than a small convolution); a dnnl::error answers no.
template <class F>
bool asked_once(const std::string& key, F&& ask) {
  static std::mutex mu;
  static std::unordered_map<std::string, bool> known;
  std::lock_guard<std::mutex> lk(mu);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool ok = false;
  try {
    ok = ask();
  } catch (const dnnl::error&) {
  }
  return known[key] = ok;
}

// Does oneDNN's f32_as_bf16 forward for this (part) shape write nChw16c bf16?
bool writes_nchw16c(const Conv2dShape& sh, bool bias) {
  return asked_once(conv_key("fwd layout", sh, Dt::f32_as_bf16, bias), [&] {
    return sh.k % 16 == 0 &&
           conv_fwd_pd(sh, Dt::f32_as_bf16, bias).dst_desc() == memory::desc(conv_dims(sh).y, dt::bf16, tag::aBcd16b);
  });
}

bool reads_nchw16c_src(const Conv2dShape& sh, bool bias) {
  return asked_once(conv_key("fwd src layout", sh, Dt::f32_as_bf16, bias), [&] {
    return sh.c % 16 == 0 &&
           conv_fwd_pd(sh, Dt::f32_as_bf16, bias).src_desc() == memory::desc(conv_dims(sh).x, dt::bf16, tag::aBcd16b);
  });
}

dnnl::convolution_backward_data::primitive_desc conv_bwdd_pd(const Conv2dShape& sh, Dt d) {
  const ConvDescs cd = conv_dims(sh);
  const dt in = to_dnnl(d);
  const dnnl::convolution_backward_data::desc desc(
      dnnl::algorithm::convolution_direct, memory::desc(cd.x, conv_out_dt(d), tag::any), memory::desc(cd.w, in, tag::any),
      memory::desc(cd.y, in, tag::any), cd.strides, cd.pad_l, cd.pad_r);
  // The hint: a forward of the same types (bf16 forward with an f32 output as above).
  return dnnl::convolution_backward_data::primitive_desc(desc, engine(), conv_fwd_pd(sh, d, false));
}

dnnl::convolution_backward_weights::primitive_desc conv_bwdw_pd(const Conv2dShape& sh, Dt d, bool bias) {
  const ConvDescs cd = conv_dims(sh);
  const dt in = to_dnnl(d);
  const memory::desc mx(cd.x, in, tag::any), mw(cd.w, dt::f32, tag::any), my(cd.y, in, tag::any),
      mb(cd.b, dt::f32, tag::a);
  const auto desc = bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, mx, mw, mb, my,
                                                                    cd.strides, cd.pad_l, cd.pad_r)
                         : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, mx, mw, my,
                                                                    cd.strides, cd.pad_l, cd.pad_r);
  return dnnl::convolution_backward_weights::primitive_desc(desc, engine(), conv_fwd_pd(sh, d, bias));
}

Entry& bwdd_entry(const Conv2dShape& sh, Dt d) {
  return cached(conv_key("conv bwd-data", sh, d, false), [&](Entry& e) {
    const ConvDescs cd = conv_dims(sh);
    const auto pd = conv_bwdd_pd(sh, d);
    e.prim = dnnl::convolution_backward_data(pd);
    e.impl = pd.impl_info_str();
    e.t[0].init(memory::desc(cd.y, user_dt(d), tag::nchw), pd.diff_dst_desc(), true);
    e.t[1].init(memory::desc(cd.w, user_dt(d), tag::oihw), pd.weights_desc(), true);
    e.t[2].init(memory::desc(cd.x, dt::f32, tag::nchw), pd.diff_src_desc(), false);
  });
}

// dy16: when not null, dy is already bf16 in the primitive's own layout (nChw16c, checked by the
// caller) and `dy` is ignored: no reorder.
void conv2d_backward_data_one(const Conv2dShape& sh, Dt d, const void* dy, const void* w, float* dx,
                              const std::uint16_t* dy16 = nullptr, const Weights* sw = nullptr) {
  Entry& e = bwdd_entry(sh, d);
  const memory mdy = dy16 ? memory(e.t[0].prim, engine(), const_cast<std::uint16_t*>(dy16)) : e.t[0].before(dy, true);
  e.prim.execute(stream(), {{DNNL_ARG_DIFF_DST, mdy},
                            {DNNL_ARG_WEIGHTS, weights_arg(e.t[1], w, sw)},
                            {DNNL_ARG_DIFF_SRC, e.t[2].before(dx, false)}});
  e.t[2].after(dx);
  stream().wait();
}

Entry& bwdw_entry(const Conv2dShape& sh, Dt d, bool bias) {
  return cached(conv_key("conv bwd-filter", sh, d, bias), [&](Entry& e) {
    const ConvDescs cd = conv_dims(sh);
    const auto pd = conv_bwdw_pd(sh, d, bias);
    e.prim = dnnl::convolution_backward_weights(pd);
    e.impl = pd.impl_info_str();
    e.t[0].init(memory::desc(cd.x, user_dt(d), tag::nchw), pd.src_desc(), true);
    e.t[1].init(memory::desc(cd.y, user_dt(d), tag::nchw), pd.diff_dst_desc(), true);
    e.t[2].init(memory::desc(cd.w, dt::f32, tag::oihw), pd.diff_weights_desc(), false);
  });
}

// dw_prim: when not null, dW is written there in the primitive's own layout (`dw` is ignored): the
// caller sums the parts' dW in that layout and reorders once.
void conv2d_backward_filter_one(const Conv2dShape& sh, Dt d, const void* x, const void* dy, float* dw, float* db,
                                const std::uint16_t* dy16 = nullptr, void* dw_prim = nullptr) {
  Entry& e = bwdw_entry(sh, d, db != nullptr);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, e.t[0].before(x, true)},
      {DNNL_ARG_DIFF_DST, dy16 ? memory(e.t[1].prim, engine(), const_cast<std::uint16_t*>(dy16)) : e.t[1].before(dy, true)},
      {DNNL_ARG_DIFF_WEIGHTS, dw_prim ? memory(e.t[2].prim, engine(), dw_prim) : e.t[2].before(dw, false)}};
  if (db) args[DNNL_ARG_DIFF_BIAS] = memory(memory::desc({sh.k}, dt::f32, tag::a), engine(), db);
  e.prim.execute(stream(), args);
  if (!dw_prim) e.t[2].after(dw);
  stream().wait();
}

// Do oneDNN's f32_as_bf16 backward kernels for this (part) shape read dy as nChw16c bf16?
bool reads_nchw16c_dy(const Conv2dShape& sh, bool bias, bool dx) {
  return asked_once(conv_key(dx ? "bwd dy layout +dx" : "bwd dy layout", sh, Dt::f32_as_bf16, bias), [&] {
    const memory::desc want(conv_dims(sh).y, dt::bf16, tag::aBcd16b);
    return sh.k % 16 == 0 && conv_bwdw_pd(sh, Dt::f32_as_bf16, bias).diff_dst_desc() == want &&
           (!dx || conv_bwdd_pd(sh, Dt::f32_as_bf16).diff_dst_desc() == want);
  });
}

// ---- the batch (rows of C) split over our kernel threads, oneDNN on one OpenMP thread in each ----

// oneDNN's team size is the calling thread's OpenMP nthreads ICV: 1 in every thread that runs our
// tasks, so no OpenMP worker spins next to our pool (kernels/cpu/threads.h). With
// DLB_CPU_THREADS=1 the call stays on the calling thread, and oneDNN's team is that one thread too.
void one_omp_thread() {
  thread_local bool done = false;
  if (!done) omp_set_num_threads(1), done = true;
}

// Tasks for n items: one per kernel thread, or more (at most `chunk` items each) so that a
// task's activations stay in cache (a batch of 64 lecture conv1 outputs is 25 MB).
int task_count(long n, long chunk) {
  if (kernel_threads() <= 1) return 1;
  return int(std::max<long>(std::min<long>(n, kernel_threads()), (n + chunk - 1) / chunk));
}

// fn(lo, hi, task) with oneDNN's out-of-memory errors as dlb::OutOfMemory (a case marked so).
template <class F>
void run_part(F& fn, long lo, long hi, int t) {
  try {
    fn(lo, hi, t);
  } catch (const dnnl::error& err) {
    if (err.status == dnnl_out_of_memory) throw OutOfMemory(std::string("oneDNN: ") + err.what());
    throw;
  }
}

// whole_if_nested: called from inside a task (a model replica's layer), one part rather than
// parallel_tasks' in-order parts (the gemm: two half products cost more than one whole).
template <class F>
void split(long n, F&& fn, long chunk = 1L << 30, bool whole_if_nested = false) {
  if (kernel_threads() <= 1 || (whole_if_nested && in_parallel_region())) {  // oneDNN's team: this thread
    one_omp_thread();
    return run_part(fn, 0L, n, 0);
  }
  const int tasks = task_count(n, chunk);
  parallel_tasks(tasks, [&](int t) {
    one_omp_thread();
    long lo, hi;
    split_range(n, tasks, t, lo, hi);
    run_part(fn, lo, hi, t);
  });
}

constexpr long kConvChunk = 8;  // images per conv task

std::size_t esize(Dt d) { return d == Dt::bf16 ? 2 : 4; }  // of the caller's arrays
const void* at(const void* p, std::size_t elems, Dt d) { return static_cast<const char*>(p) + elems * esize(d); }
Conv2dShape part(Conv2dShape s, long lo, long hi) {
  s.n = int(hi - lo);
  return s;
}

// The parts of a batch split as `split` cuts it (at most two sizes), each checked with ok(part).
template <class F>
bool every_part(const Conv2dShape& sh, F&& ok) {
  const int tasks = task_count(sh.n, kConvChunk);
  const long small = sh.n / tasks, big = (sh.n + tasks - 1) / tasks;
  for (long m : {small, big})
    if (m > 0 && !ok(part(sh, 0, m))) return false;
  return true;
}

// Weights for a call `split` cuts into several parts: reordered here, on the calling thread, into the
// layout the largest part's primitive reads (tensor(part) is that primitive's weights Tensor).
template <class F>
Weights shared_weights(const Conv2dShape& sh, const void* w, F&& tensor) {
  Weights sw;
  const int tasks = task_count(sh.n, kConvChunk);
  if (kernel_threads() <= 1 || tasks <= 1) return sw;
  one_omp_thread();
  Tensor& t = tensor(part(sh, 0, (sh.n + tasks - 1) / tasks));
  if (!t.reordered) return sw;
  sw.prim = t.prim;
  sw.buf.resize(t.prim.get_size());
  memory um(t.user, engine(), const_cast<void*>(w)), pm(t.prim, engine(), sw.buf.data());
  t.to_prim.execute(stream(), um, pm);
  stream().wait();
  return sw;
}
// shared_weights of a forward / a backward-data call.
Weights fwd_weights(const Conv2dShape& sh, Dt d, const void* w, const float* bias) {
  return shared_weights(sh, w, [&](const Conv2dShape& p) -> Tensor& { return conv_fwd_entry(p, d, bias).t[1]; });
}
Weights bwdd_weights(const Conv2dShape& sh, Dt d, const void* w) {
  return shared_weights(sh, w, [&](const Conv2dShape& p) -> Tensor& { return bwdd_entry(p, d).t[1]; });
}


}  // namespace

void gemm(const Gemm& g) {
  if (g.m <= 0 || g.n <= 0) return;
  const long lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k), ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n),
             ldc = g.ldc ? g.ldc : g.n;
  // Each thread reads its slice of one operand and all of the other: split the side whose full read
  // costs more to repeat (rows of C share B, k x n; columns share A, m x k), i.e. rows when n <= m.
  const bool by_rows = g.n <= g.m;
  split(by_rows ? g.m : g.n, [&](long lo, long hi, int) {
    Gemm p = g;
    p.lda = lda, p.ldb = ldb, p.ldc = ldc;
    if (by_rows) {
      p.m = hi - lo;
      p.a = at(g.a, std::size_t(g.trans_a ? lo : lo * lda), g.dt);
      p.c = g.c + lo * ldc;
    } else {
      p.n = hi - lo;
      p.b = at(g.b, std::size_t(g.trans_b ? lo * ldb : lo), g.dt);
      p.c = g.c + lo;
      if (g.bias) p.bias = g.bias + lo;
    }
    gemm_one(p);
  }, 1L << 30, true);
}

void conv2d_forward(const Conv2dShape& sh, Dt d, const void* x, const void* w, const float* bias, float* y) {
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  const Weights sw = fwd_weights(sh, d, w, bias);
  split(sh.n, [&](long lo, long hi, int) {
    conv2d_forward_one(part(sh, lo, hi), d, at(x, lo * xi, d), w, bias, y + lo * yi, &sw);
  }, kConvChunk);
}

bool conv2d_forward_writes_nchw16c(const Conv2dShape& sh, bool bias) {
  return every_part(sh, [&](const Conv2dShape& p) { return writes_nchw16c(p, bias); });
}

bool conv2d_forward_bf16_nchw16c(const Conv2dShape& sh, const float* x, const float* w, const float* bias,
                                 std::uint16_t* y16) {
  if (!conv2d_forward_writes_nchw16c(sh, bias != nullptr)) return false;
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  const Weights sw = fwd_weights(sh, Dt::f32_as_bf16, w, bias);
  split(sh.n, [&](long lo, long hi, int) {
    conv2d_forward_one_nchw16c(part(sh, lo, hi), x + lo * xi, w, bias, y16 + lo * yi, &sw);
  }, kConvChunk);
  return true;
}

bool conv2d_forward_reads_nchw16c_src(const Conv2dShape& sh, bool bias) {
  return every_part(sh, [&](const Conv2dShape& p) { return writes_nchw16c(p, bias) && reads_nchw16c_src(p, bias); });
}

bool conv2d_forward_bf16_nchw16c_src(const Conv2dShape& sh, const std::uint16_t* x16, const float* w, const float* bias,
                                     std::uint16_t* y16) {
  if (!conv2d_forward_reads_nchw16c_src(sh, bias != nullptr)) return false;
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  const Weights sw = fwd_weights(sh, Dt::f32_as_bf16, w, bias);
  split(sh.n, [&](long lo, long hi, int) {
    conv2d_forward_one_nchw16c_src(part(sh, lo, hi), x16 + lo * xi, w, bias, y16 + lo * yi, &sw);
  }, kConvChunk);
  return true;
}

void conv2d_backward_data(const Conv2dShape& sh, Dt d, const void* dy, const void* w, float* dx) {
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  const Weights sw = bwdd_weights(sh, d, w);
  split(sh.n, [&](long lo, long hi, int) {
    conv2d_backward_data_one(part(sh, lo, hi), d, at(dy, lo * yi, d), w, dx + lo * xi, nullptr, &sw);
  }, kConvChunk);
}

bool conv2d_backward_reads_nchw16c_dy(const Conv2dShape& sh, bool db, bool dx) {
  return every_part(sh, [&](const Conv2dShape& p) { return reads_nchw16c_dy(p, db, dx); });
}

// The batch split for dW (+ db): fn(lo, hi, pw, pb, pprim) sums images [lo, hi) into pw/pb, or, when
// pprim is not null, dW into pprim in the primitive's layout (`prim`: every part's, f32) and db into
// pb. Task 0 writes dw/db (or its pprim); the others their own partial sums, added in task order
// (deterministic); dW summed in the primitive's layout is reordered to dw once, at the end.
template <class F>
void split_dw(const Conv2dShape& sh, float* dw, float* db, const memory::desc* prim, F&& fn) {
  const std::size_t nw = sh.w_size(), nb = db ? sh.k : 0, np = prim ? prim->get_size() / sizeof(float) : 0;
  const std::size_t per = prim ? np + nb : nw + nb;
  std::vector<std::vector<float>> partial(std::size_t(task_count(sh.n, kConvChunk)));
  if (prim) partial[0].assign(np, 0.f);
  split(sh.n, [&](long lo, long hi, int t) {
    float* pw = dw;
    float* pb = db;
    if (t > 0) {
      partial[t].assign(per, 0.f);
      pw = partial[t].data(), pb = db ? pw + (prim ? np : nw) : nullptr;
    }
    if (prim) return fn(lo, hi, nullptr, pb, t > 0 ? pw : partial[0].data());
    fn(lo, hi, pw, pb, nullptr);
  }, kConvChunk);
  float* sum = prim ? partial[0].data() : dw;
  const std::size_t ns = prim ? np : nw;
  for (std::size_t t = 1; t < partial.size(); ++t) {
    if (partial[t].empty()) continue;
    for (std::size_t i = 0; i < ns; ++i) sum[i] += partial[t][i];
    for (std::size_t i = 0; i < nb; ++i) db[i] += partial[t][ns + i];
  }
  if (prim) {
    memory pm(*prim, engine(), sum), um(memory::desc(conv_dims(sh).w, dt::f32, tag::oihw), engine(), dw);
    dnnl::reorder(pm, um).execute(stream(), pm, um);
    stream().wait();
  }
}

// The dW layout every part's backward-weights primitive writes, when it is not the caller's (oihw
// f32) and the same for the (at most two) part sizes; null otherwise (each part reorders its own).
const memory::desc* parts_dw_layout(const Conv2dShape& sh, Dt d, bool bias, memory::desc& out) {
  const int tasks = task_count(sh.n, kConvChunk);
  if (kernel_threads() <= 1 || tasks <= 1) return nullptr;
  one_omp_thread();
  const long small = sh.n / tasks, big = (sh.n + tasks - 1) / tasks;
  const Tensor& tb = bwdw_entry(part(sh, 0, big), d, bias).t[2];
  if (!tb.reordered) return nullptr;
  if (small > 0 && small != big && !(bwdw_entry(part(sh, 0, small), d, bias).t[2].prim == tb.prim)) return nullptr;
  out = tb.prim;
  return &out;
}

bool conv2d_backward_bf16_nchw16c_dy(const Conv2dShape& sh, const float* x, const float* w, const std::uint16_t* dy16,
                                     float* dw, float* db, float* dx) {
  if (!every_part(sh, [&](const Conv2dShape& p) { return reads_nchw16c_dy(p, db != nullptr, dx != nullptr); }))
    return false;
  const Dt d = Dt::f32_as_bf16;
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  Weights sw;
  if (dx) sw = bwdd_weights(sh, d, w);
  memory::desc layout;
  const memory::desc* prim = parts_dw_layout(sh, d, db != nullptr, layout);
  split_dw(sh, dw, db, prim, [&](long lo, long hi, float* pw, float* pb, float* pprim) {
    conv2d_backward_filter_one(part(sh, lo, hi), d, x + lo * xi, nullptr, pw, pb, dy16 + lo * yi, pprim);
    if (dx) conv2d_backward_data_one(part(sh, lo, hi), d, nullptr, w, dx + lo * xi, dy16 + lo * yi, &sw);
  });
  return true;
}

void conv2d_backward_filter(const Conv2dShape& sh, Dt d, const void* x, const void* dy, float* dw, float* db) {
  const std::size_t xi = sh.x_size() / sh.n, yi = sh.y_size() / sh.n;
  memory::desc layout;
  const memory::desc* prim = parts_dw_layout(sh, d, db != nullptr, layout);
  split_dw(sh, dw, db, prim, [&](long lo, long hi, float* pw, float* pb, float* pprim) {
    conv2d_backward_filter_one(part(sh, lo, hi), d, at(x, lo * xi, d), at(dy, lo * yi, d), pw, pb, nullptr, pprim);
  });
}

#endif

}  // namespace dlb::cpu::onednn
