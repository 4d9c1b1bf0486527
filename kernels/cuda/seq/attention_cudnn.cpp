// cuDNN's fused attention through cudnn-frontend's graph (sdpa, sdpa_backward): see attention_cudnn.h.
// The frontend calls cuDNN's backend API (cudnnBackend* of cudnn_graph.h); those resolve through
// kernels/cuda/lazy_libs.cpp like every other cuDNN call, so nothing loads libcudnn before the first
// use on a machine with a device (issue 13). Ran on an H100 (2026-11-27): its tests and the
// attention suite's cudnn rows passed.
#include "kernels/cuda/seq/attention_cudnn.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/common/errors.h"

#ifdef DLB_HAVE_CUDNN_FRONTEND
// The frontend's JSON (plan serialization) is not used; skipping it keeps a second copy of nlohmann
// out of the binary (the project links its own).
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#endif

namespace dlb::cuda::seq {

namespace {

void check_dtype(const Attn& a, DType t) {
  if (t != DType::bf16 && t != DType::fp16)
    throw Unsupported(std::string("cudnn attention: ") + dtype_name(t) +
                      " storage not offered by cuDNN's fused SDPA (fp16, bf16 only)");
  if (a.dropout > 0) throw Unsupported("cudnn attention: dropout not wired (ours draws Philox as the CPU does)");
}

}  // namespace

#ifndef DLB_HAVE_CUDNN_FRONTEND

std::string cudnn_attention_unavailable() {
  return "cudnn attention: built without cudnn-frontend's headers (ci/bootstrap.sh build fetches them; CMake "
         "DLB_CUDNN_FRONTEND_INCLUDE, DLB_ENABLE_CUDNN_FRONTEND)";
}
void attention_forward_cudnn(const Attn& a, AnyView, AnyView, AnyView, AnyMView, float*, DType t, cudaStream_t) {
  check_dtype(a, t);
  throw Unsupported(cudnn_attention_unavailable());
}
void attention_backward_cudnn(const Attn& a, AnyView, AnyView, AnyView, AnyView, AnyView, const float*, AnyMView,
                              AnyMView, AnyMView, float*, DType t, cudaStream_t) {
  check_dtype(a, t);
  throw Unsupported(cudnn_attention_unavailable());
}

#else

namespace {

namespace fe = cudnn_frontend;
using Dims = std::vector<std::int64_t>;

enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// What a graph is built for: pass, sizes, causal, scale, dtype and every view's strides, the device.
using Key = std::vector<std::int64_t>;

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
};

// Per host thread (the cuDNN handle is per thread too): the built graphs and one growing workspace per
// device. A workspace is only reused on the thread (and so stream order) that last enqueued on it.
struct ThreadState {
  std::map<Key, Plan> plans;
  std::map<int, DeviceBuffer<std::uint8_t>> workspace;
};
ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

void fe_check(fe::error_t e, const char* what) {
  if (!e.is_good()) throw Unsupported(std::string("cudnn attention: ") + what + ": " + e.get_message());
}

Dims bhtd(const Attn& a, int T) { return {a.B, a.H, T, a.D}; }
Dims strides(long sb, long sh, long st) { return {sb, sh, st, 1}; }

std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& g, const char* name, Uid uid, Dims dim,
                                                     Dims stride) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
}

std::shared_ptr<fe::graph::Graph> new_graph(DType t) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(t == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

// Validates, lowers to cuDNN's backend graph, builds the first supported plan of heuristics mode A (the
// frontend's own SDPA samples' path); any refusal (shape, head dim, device, cuDNN version) becomes
// Unsupported with cuDNN's words.
Plan finish(std::shared_ptr<fe::graph::Graph> g, cudnnHandle_t h) {
  fe_check(g->validate(), "validate");
  fe_check(g->build_operation_graph(h), "build_operation_graph");
  fe_check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  fe_check(g->check_support(h), "check_support");
  fe_check(g->build_plans(h), "build_plans");
  Plan p;
  p.graph = std::move(g);
  fe_check(p.graph->get_workspace_size(p.workspace), "get_workspace_size");
  return p;
}

Plan build_forward(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, DType t, cudnnHandle_t h) {
  auto g = new_graph(t);
  auto Q = tensor(*g, "Q", kQ, bhtd(a, a.Tq), strides(q.sb, q.sh, q.st));
  auto K = tensor(*g, "K", kK, bhtd(a, a.Tk), strides(k.sb, k.sh, k.st));
  auto V = tensor(*g, "V", kV, bhtd(a, a.Tk), strides(v.sb, v.sh, v.st));
  auto opt = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(a.sc());
  if (a.causal) opt.set_causal_mask(true);
  auto [O, stats] = g->sdpa(Q, K, V, opt);
  O->set_output(true).set_uid(kO).set_dim(bhtd(a, a.Tq)).set_stride(strides(o.sb, o.sh, o.st));
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  stats->set_dim({a.B, a.H, a.Tq, 1}).set_stride({std::int64_t(a.H) * a.Tq, a.Tq, 1, 1});
  return finish(std::move(g), h);
}

Plan build_backward(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout, AnyMView dq,
                    AnyMView dk, AnyMView dv, DType t, cudnnHandle_t h) {
  auto g = new_graph(t);
  auto Q = tensor(*g, "Q", kQ, bhtd(a, a.Tq), strides(q.sb, q.sh, q.st));
  auto K = tensor(*g, "K", kK, bhtd(a, a.Tk), strides(k.sb, k.sh, k.st));
  auto V = tensor(*g, "V", kV, bhtd(a, a.Tk), strides(v.sb, v.sh, v.st));
  auto O = tensor(*g, "O", kO, bhtd(a, a.Tq), strides(o.sb, o.sh, o.st));
  auto dO = tensor(*g, "dO", kDO, bhtd(a, a.Tq), strides(dout.sb, dout.sh, dout.st));
  auto stats = tensor(*g, "stats", kStats, {a.B, a.H, a.Tq, 1}, {std::int64_t(a.H) * a.Tq, a.Tq, 1, 1});
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto opt = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(a.sc());
  if (a.causal) opt.set_causal_mask(true);
  auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opt);
  dQ->set_output(true).set_uid(kDQ).set_dim(bhtd(a, a.Tq)).set_stride(strides(dq.sb, dq.sh, dq.st));
  dK->set_output(true).set_uid(kDK).set_dim(bhtd(a, a.Tk)).set_stride(strides(dk.sb, dk.sh, dk.st));
  dV->set_output(true).set_uid(kDV).set_dim(bhtd(a, a.Tk)).set_stride(strides(dv.sb, dv.sh, dv.st));
  return finish(std::move(g), h);
}

template <class... View>
Key key(bool bwd, const Attn& a, DType t, int dev, const View&... views) {
  std::uint32_t scale = 0;
  const float sc = a.sc();
  std::memcpy(&scale, &sc, 4);
  Key k{bwd, a.B, a.H, a.Tq, a.Tk, a.D, a.causal, scale, int(t), dev};
  (k.insert(k.end(), {views.sb, views.sh, views.st}), ...);
  return k;
}

// The plan for `k` (built by `make` on first use) and a workspace of its size on this device.
template <class Make>
std::pair<const Plan*, void*> plan_for(const Key& k, int dev, Make make) {
  ThreadState& st = state();
  auto it = st.plans.find(k);
  if (it == st.plans.end()) it = st.plans.emplace(k, make()).first;
  DeviceBuffer<std::uint8_t>& ws = st.workspace[dev];
  if (ws.size() < std::size_t(it->second.workspace)) {
    DLB_CUDA_CHECK(cudaDeviceSynchronize());  // the old workspace may still be in use by enqueued work
    ws = DeviceBuffer<std::uint8_t>(std::size_t(it->second.workspace));
  }
  return {&it->second, ws.data()};
}

int current_device() {
  int dev = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

}  // namespace

std::string cudnn_attention_unavailable() { return ""; }

void attention_forward_cudnn(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                             cudaStream_t s) {
  a.check();
  check_dtype(a, t);
  const int dev = current_device();
  cudnnHandle_t h = cudnn_handle_on(s);
  const Key kk = key(false, a, t, dev, q, k, v, o);
  auto [plan, ws] = plan_for(kk, dev, [&] { return build_forward(a, q, k, v, o, t, h); });
  std::unordered_map<std::int64_t, void*> pack = {{kQ, const_cast<void*>(q.p)}, {kK, const_cast<void*>(k.p)},
                                                  {kV, const_cast<void*>(v.p)}, {kO, o.p}, {kStats, lse}};
  fe_check(plan->graph->execute(h, pack, ws), "execute (forward)");
}

void attention_backward_cudnn(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout,
                              const float* lse, AnyMView dq, AnyMView dk, AnyMView dv, float*, DType t,
                              cudaStream_t s) {
  a.check();
  check_dtype(a, t);
  const int dev = current_device();
  cudnnHandle_t h = cudnn_handle_on(s);
  const Key kk = key(true, a, t, dev, q, k, v, o, dout, dq, dk, dv);
  auto [plan, ws] = plan_for(kk, dev, [&] { return build_backward(a, q, k, v, o, dout, dq, dk, dv, t, h); });
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, const_cast<void*>(q.p)},   {kK, const_cast<void*>(k.p)},       {kV, const_cast<void*>(v.p)},
      {kO, const_cast<void*>(o.p)},   {kDO, const_cast<void*>(dout.p)},   {kStats, const_cast<float*>(lse)},
      {kDQ, dq.p},                    {kDK, dk.p},                        {kDV, dv.p}};
  fe_check(plan->graph->execute(h, pack, ws), "execute (backward)");
}

#endif

const std::vector<FlashKernel>& cudnn_attention_kernels() {
  // Head dims 64 and 128 (the table's tensor-core rule); cuDNN takes any multiple of 8 up to 128 (256
  // on Hopper) and says so when it does not.
  static const std::vector<FlashKernel> rows = {
      {"cudnn", DType::bf16, true, 128, attention_forward_cudnn, attention_backward_cudnn},
      {"cudnn", DType::fp16, true, 128, attention_forward_cudnn, attention_backward_cudnn},
  };
  return rows;
}

}  // namespace dlb::cuda::seq
