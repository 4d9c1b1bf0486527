// Suite "attention": scaled dot-product attention, forward and backward, causal and full, at a fixed
// token count per case (axis "tokens" = batch x seq; GPU default 16k, the FlashAttention papers'
// setting) over seq lengths and head dims (heads = "width" / head_dim: width 2048 on the GPU, 768
// (GPT-2 small) on the CPU).
//   cpu   impl=flash (ours, fused, fp32), impl=unfused (OpenBLAS GEMMs + P materialized)
//   cuda  one case per row of cuda::seq::flash_kernels() (flash fp32 / bf16 on the FP32 pipes,
//         flash_tc bf16 on the tensor cores), impl=unfused (cuBLAS, fp32), impl=cudnn (cuDNN's fused
//         SDPA through cudnn-frontend, bf16; skips with cuDNN's reason where it refuses a shape, or
//         where the build lacks the frontend); first run on an H100, 2026-11-27.
//   --peer pytorch: impl=pytorch_sdpa, F.scaled_dot_product_attention (its FlashAttention backend
//         where torch takes it) on our very inputs, its output checked as ours (fp32; bf16 on the GPU)
// Names: attention/<pass>/<device>/<dtype>/impl=<impl>/causal=<bool>/seq=<T>/head_dim=<D>/batch=<B>;
// `pass` (the op) is forward or backward: a backward case times backward alone (its forward ran in
// setup). FLOPs: forward 4 B H T^2 D (half with causal), backward 2.5x forward (FlashAttention-2's
// count: 5 GEMMs against forward's 2) for every impl, so TFLOP/s compare as times do. Every case is
// checked before it is timed: O (and dQ, dK, dV) against fp64 on sampled heads and rows
// (kernels/cpu/seq/attention_check.h), bf16 cases against the reference of their rounded inputs.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/gpu_timing.h"
#include "bench/peer.h"
#include "bench/suite.h"
#include "bench/training_cases.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/seq/attention.h"
#include "kernels/cpu/seq/attention_check.h"

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/seq/attention.h"
#include "kernels/cuda/seq/attention_cudnn.h"
#endif

namespace dlb::bench {

namespace {

namespace cs = cpu::seq;

struct Shape {
  int B, H, T, D;
  bool causal;
  cs::Attn attn() const {
    cs::Attn a;
    a.B = B, a.H = H, a.Tq = T, a.Tk = T, a.D = D, a.causal = causal;
    return a;
  }
  std::size_t elems() const { return std::size_t(B) * H * T * D; }
};

// Host tensors [B, H, T, D]: q, k, v, dO seeded, rounded to bf16 when the case stores bf16 (the
// reference then sees what the kernel sees); o, dq, dk, dv what the kernel returned.
struct Host {
  std::vector<float> q, k, v, g, o, dq, dk, dv;
  void fill(const Shape& s, bool bf16) {
    const std::size_t n = s.elems();
    try {
      for (auto* x : {&q, &k, &v, &g}) x->resize(n);
      for (auto* x : {&o, &dq, &dk, &dv}) x->assign(n, 0.f);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("attention: host tensors of " + std::to_string(n) + " floats");
    }
    std::uint64_t seed = 1;
    for (auto* x : {&q, &k, &v, &g}) {
      fill_uniform(x->data(), n, seed++);
      if (bf16)
        for (float& e : *x) e = cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(e));
    }
  }
  CheckResult check(const Shape& s, bool backward, DType t) const {
    const cs::Attn a = s.attn();
    auto c = [&](const std::vector<float>& x) { return cs::bhtd<const float>(x.data(), s.H, s.T, s.D); };
    const cs::AttnCheck e = backward ? cs::attention_check_sampled(a, c(q), c(k), c(v), c(o), c(g), c(dq), c(dk), c(dv))
                                     : cs::attention_check_sampled(a, c(q), c(k), c(v), c(o), {}, {}, {}, {});
    // bf16 storage rounds O before backward's rowdot (and the tensor-core kernels P and dS): 3x.
    return judge(e.worst(), (t == DType::bf16 ? 3 : 1) * default_tolerance(t),
                 "attention O/dQ/dK/dV on sampled rows");
  }
  void clear() { *this = Host{}; }
};

void annotate_shape(json& r, const Shape& s, double flops, double esz, bool backward) {
  r["heads"] = s.H;
  r["flops"] = flops;
  // Bytes at least moved: Q, K, V, O (+ dO, dQ, dK, dV) once.
  r["bytes"] = esz * double(s.elems()) * (backward ? 8 : 4);
}

// ---------------------------------------------------------------- CPU
class CpuAttn final : public Case {
 public:
  CpuAttn(Shape s, std::string impl, bool backward) : s_(s), impl_(std::move(impl)), bwd_(backward) {}
  void setup() override {
    algo_ = &cs::attention_algo(impl_);
    h_.fill(s_, false);
    if (bwd_) forward();  // what backward reads, once
  }
  CheckResult verify() override {
    forward();
    if (bwd_) backward();
    return h_.check(s_, bwd_, DType::fp32);
  }
  double run() override {
    bwd_ ? backward() : forward();
    return 0;
  }
  Work work() const override { return {flops(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override { annotate_shape(r, s_, flops(), 4, bwd_); }
  void teardown() override { h_.clear(), saved_ = {}; }

 private:
  double flops() const { return s_.attn().flops_forward() * (bwd_ ? 2.5 : 1.0); }
  cs::CView c(const std::vector<float>& x) const { return cs::bhtd<const float>(x.data(), s_.H, s_.T, s_.D); }
  cs::MView m(std::vector<float>& x) const { return cs::bhtd<float>(x.data(), s_.H, s_.T, s_.D); }
  void forward() { algo_->forward(s_.attn(), c(h_.q), c(h_.k), c(h_.v), m(h_.o), saved_); }
  void backward() {
    algo_->backward(s_.attn(), c(h_.q), c(h_.k), c(h_.v), c(h_.o), c(h_.g), saved_, m(h_.dq), m(h_.dk), m(h_.dv));
  }
  Shape s_;
  std::string impl_;
  bool bwd_;
  const cs::AttnAlgo* algo_ = nullptr;
  Host h_;
  cs::AttnSaved saved_;
};

#ifdef DLB_HAVE_CUDA
// ---------------------------------------------------------------- GPU
// impl: a fused row (of flash_kernels() or cudnn_attention_kernels()) or unfused (row null, fp32).
class GpuAttn final : public Case {
 public:
  GpuAttn(int dev, Shape s, const cuda::seq::FlashKernel* row, bool backward)
      : dev_(dev), s_(s), row_(row), bwd_(backward), timer_(dev) {}
  void setup() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    t_ = row_ ? kernel().storage : DType::fp32;
    if (row_ && !kernel().takes(s_.D))
      throw Unsupported(std::string(kernel().name) + ": head dim " + std::to_string(s_.D) + " not taken");
    h_.fill(s_, t_ == DType::bf16);
    const std::size_t n = s_.elems(), esz = t_ == DType::bf16 ? 2 : 4;
    for (auto* b : {&q_, &k_, &v_, &g_, &o_, &dq_, &dk_, &dv_}) *b = cuda::DeviceBuffer<std::uint8_t>(n * esz);
    upload(q_, h_.q), upload(k_, h_.k), upload(v_, h_.v), upload(g_, h_.g);
    const std::size_t rows = std::size_t(s_.B) * s_.H * s_.T;
    if (row_) {
      lse_ = cuda::DeviceBuffer<float>(rows), scratch_ = cuda::DeviceBuffer<float>(rows);
    } else {
      probs_ = cuda::DeviceBuffer<float>(rows * std::size_t(s_.T));
      if (bwd_) scratch_ = cuda::DeviceBuffer<float>(rows * std::size_t(s_.T));
    }
    if (bwd_) forward();
  }
  CheckResult verify() override {
    forward();
    if (bwd_) backward();
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    download(o_, h_.o);
    if (bwd_) download(dq_, h_.dq), download(dk_, h_.dk), download(dv_, h_.dv);
    return h_.check(s_, bwd_, t_);
  }
  double run() override {
    return timer_.time([this] { bwd_ ? backward() : forward(); });
  }
  long calls_per_run() const override { return timer_.calls(); }
  bool manual_time() const override { return true; }
  Work work() const override { return {flops(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, s_, flops(), t_ == DType::bf16 ? 2 : 4, bwd_);
    r["tensor_cores"] = row_ && kernel().tensor_cores;
    timer_.annotate(r);
  }
  void teardown() override {
    timer_.release();
    h_.clear();
    for (auto* b : {&q_, &k_, &v_, &g_, &o_, &dq_, &dk_, &dv_}) *b = {};
    lse_ = {}, scratch_ = {}, probs_ = {};
  }

 private:
  const cuda::seq::FlashKernel& kernel() const { return *row_; }
  double flops() const { return s_.attn().flops_forward() * (bwd_ ? 2.5 : 1.0); }
  void upload(cuda::DeviceBuffer<std::uint8_t>& d, const std::vector<float>& x) {
    if (t_ == DType::fp32) {
      d.upload(reinterpret_cast<const std::uint8_t*>(x.data()), x.size() * 4);
      return;
    }
    std::vector<std::uint16_t> b(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) b[i] = cpu::fp32_to_bf16_ref(x[i]);
    d.upload(reinterpret_cast<const std::uint8_t*>(b.data()), b.size() * 2);
  }
  void download(const cuda::DeviceBuffer<std::uint8_t>& d, std::vector<float>& x) const {
    if (t_ == DType::fp32) {
      d.download(reinterpret_cast<std::uint8_t*>(x.data()), x.size() * 4);
      return;
    }
    std::vector<std::uint16_t> b(x.size());
    d.download(reinterpret_cast<std::uint8_t*>(b.data()), b.size() * 2);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = cpu::bf16_to_fp32_ref(b[i]);
  }
  cuda::seq::AnyView av(const cuda::DeviceBuffer<std::uint8_t>& d) const {
    return {d.data(), long(s_.H) * s_.T * s_.D, long(s_.T) * s_.D, s_.D};
  }
  cuda::seq::AnyMView am(cuda::DeviceBuffer<std::uint8_t>& d) const {
    return {d.data(), long(s_.H) * s_.T * s_.D, long(s_.T) * s_.D, s_.D};
  }
  cs::CView fc(const cuda::DeviceBuffer<std::uint8_t>& d) const {
    return cs::bhtd<const float>(reinterpret_cast<const float*>(d.data()), s_.H, s_.T, s_.D);
  }
  cs::MView fm(cuda::DeviceBuffer<std::uint8_t>& d) const {
    return cs::bhtd<float>(reinterpret_cast<float*>(d.data()), s_.H, s_.T, s_.D);
  }
  void forward() {
    const cs::Attn a = s_.attn();
    if (!row_) cuda::seq::attention_forward_unfused(a, fc(q_), fc(k_), fc(v_), fm(o_), probs_.data(), nullptr);
    else kernel().forward(a, av(q_), av(k_), av(v_), am(o_), lse_.data(), t_, nullptr);
  }
  void backward() {
    const cs::Attn a = s_.attn();
    if (!row_)
      cuda::seq::attention_backward_unfused(a, fc(q_), fc(k_), fc(v_), fc(g_), probs_.data(), fm(dq_), fm(dk_), fm(dv_),
                                            scratch_.data(), nullptr);
    else
      kernel().backward(a, av(q_), av(k_), av(v_), av(o_), av(g_), lse_.data(), am(dq_), am(dk_), am(dv_),
                        scratch_.data(), t_, nullptr);
  }
  int dev_;
  Shape s_;
  const cuda::seq::FlashKernel* row_;
  bool bwd_;
  DType t_ = DType::fp32;
  GpuCallTimer timer_;
  Host h_;
  cuda::DeviceBuffer<std::uint8_t> q_, k_, v_, g_, o_, dq_, dk_, dv_;
  cuda::DeviceBuffer<float> lse_, scratch_, probs_;
};
#endif

// ---------------------------------------------------------------- the PyTorch peer
namespace fs = std::filesystem;

void write_f32(const fs::path& f, const std::vector<float>& x) {
  std::ofstream out(f, std::ios::binary);
  out.write(reinterpret_cast<const char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
  if (!out) throw std::runtime_error("attention peer: cannot write " + f.string());
}
void read_f32(const fs::path& f, std::vector<float>& x) {
  std::ifstream in(f, std::ios::binary);
  if (!in || fs::file_size(f) != x.size() * sizeof(float))
    throw std::runtime_error("attention peer: " + f.string() + " missing or not " + std::to_string(x.size()) + " floats");
  in.read(reinterpret_cast<char*>(x.data()), std::streamsize(x.size() * sizeof(float)));
}

// The peer's case at one point: our seeded inputs written to a folder it reads, its outputs read back
// and checked against fp64 as our kernels' are. Calls per repetition: ~0.25 s at 20 GFLOP/s (CPU) or
// 20 TFLOP/s (GPU), 1..1000, so one repetition is long enough to time and short enough to interleave.
void add_sdpa_peer(std::vector<CaseSpec>& cases, const CaseId& id, const std::string& dev, const Shape& sh, bool bwd,
                   DType t, int reps) {
  const double flops = sh.attn().flops_forward() * (bwd ? 2.5 : 1.0);
  const int calls = int(std::clamp((is_gpu(dev) ? 20e12 : 20e9) * 0.25 / flops, 1.0, 1000.0));
  const fs::path dir = fs::temp_directory_path() /
                       ("dlb-attn-" + std::to_string(::getpid()) + "-" + dev + "-" + dtype_name(t) + (bwd ? "-bwd" : "-fwd") +
                        (sh.causal ? "-causal" : "-full") + "-" + std::to_string(sh.T) + "x" + std::to_string(sh.D));
  auto host = std::make_shared<Host>();
  PeerSpec p;
  p.script = "pytorch_attention.py";
  p.args = {"--dir", dir.string(), "--batch", std::to_string(sh.B), "--heads", std::to_string(sh.H), "--seq",
            std::to_string(sh.T), "--head-dim", std::to_string(sh.D), "--causal", sh.causal ? "1" : "0", "--pass",
            bwd ? "backward" : "forward", "--device", dev, "--dtype", dtype_name(t), "--calls", std::to_string(calls)};
  p.request = "calls";
  p.work = {flops * calls, 0, 0};
  p.metric = Metric::gflops;
  annotate_shape(p.keys, sh, flops, t == DType::bf16 ? 2 : 4, bwd);
  p.keys["calls"] = calls;
  p.prepare = [=](PeerSpec&) {
    host->fill(sh, t == DType::bf16);
    fs::create_directories(dir);
    for (const auto& [name, x] : {std::pair{"q.bin", &host->q}, {"k.bin", &host->k}, {"v.bin", &host->v}, {"g.bin", &host->g}})
      write_f32(dir / name, *x);
  };
  p.check = [=] {
    read_f32(dir / "o.bin", host->o);
    if (bwd)
      for (const auto& [name, x] : {std::pair{"dq.bin", &host->dq}, {"dk.bin", &host->dk}, {"dv.bin", &host->dv}})
        read_f32(dir / name, *x);
    return host->check(sh, bwd, t);
  };
  p.cleanup = [=] {
    host->clear();
    std::error_code ec;
    fs::remove_all(dir, ec);
  };
  add_peer(cases, id, p, reps);
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const int peer_reps = peer_repetitions(o);  // 0: no --peer
  const bool peer = peer_reps > 0;
  const auto causals = axis_strings(o, "causal");
  const auto passes = axis_strings(o, "pass");
  const auto dims = axis_ints(o, "head_dim");
  for (const auto& dev : o.devices) {
    const bool gpu = is_gpu(dev);
    const auto seqs = axis_ints(o, gpu ? "gpu_seq" : "seq");
    const long long tokens = axis_ints(o, gpu ? "gpu_tokens" : "tokens").front();
    const long long width = axis_ints(o, gpu ? "gpu_width" : "width").front();
    for (const auto& pass : passes)
      for (const auto& causal : causals)
        for (long long T : seqs)
          for (long long D : dims) {
            if (width % D || T > tokens) continue;
            const Shape sh{int(tokens / T), int(width / D), int(T), int(D), causal == "true"};
            auto id = [&](const std::string& dtype, const std::string& impl) {
              CaseId c{"attention", pass, dev, dtype, {}};
              return c.with("impl", impl).with("causal", causal == "true").with("seq", T).with("head_dim", D).with("batch", sh.B);
            };
            const bool bwd = pass == "backward";
            if (!gpu) {
              for (const auto& algo : cs::attention_algos())
                cases.push_back({id("fp32", algo.name), [=] { return std::make_unique<CpuAttn>(sh, algo.name, bwd); }});
              if (peer) add_sdpa_peer(cases, id("fp32", "pytorch_sdpa"), dev, sh, bwd, DType::fp32, peer_reps);
              continue;
            }
            if (peer)
              for (DType t : {DType::fp32, DType::bf16})
                add_sdpa_peer(cases, id(dtype_name(t), "pytorch_sdpa"), dev, sh, bwd, t, peer_reps);
#ifdef DLB_HAVE_CUDA
            const int g = gpu_index(dev);
            // Ours, then cuDNN's (its fp16 row too is tested in test_attention_cudnn_gpu; the case's
            // host rounding here is bf16's, so the suite times the bf16 rows).
            for (const auto* rows : {&cuda::seq::flash_kernels(), &cuda::seq::cudnn_attention_kernels()})
              for (const cuda::seq::FlashKernel& r : *rows)
                if (r.takes(int(D)) && r.storage != DType::fp16)
                  cases.push_back({id(dtype_name(r.storage), r.name),
                                   [=, row = &r] { return std::make_unique<GpuAttn>(g, sh, row, bwd); }});
            if (T <= 4096)  // P is B H T^2 floats: 8.6 GB at T 4096 (D 64), twice with backward's scratch
              cases.push_back({id("fp32", "unfused"), [=] { return std::make_unique<GpuAttn>(g, sh, nullptr, bwd); }});
#endif
          }
  }
  return cases;
}

}  // namespace

DLB_SUITE(attention)
    .about("Attention forward and backward, causal and full: ours fused (flash, flash_tc) against unfused, cuDNN's "
           "fused SDPA (cudnn, GPU) and, with "
           "--peer pytorch, torch's scaled_dot_product_attention; axes tokens, seq, head_dim, width (CPU; gpu_seq, "
           "gpu_tokens, gpu_width on the GPU), causal, pass")
    .axis("pass", {"forward", "backward"})
    .axis("causal", {"true", "false"})
    .axis("head_dim", {64, 128}, {64})
    .axis("seq", {256, 1024}, {128})
    .axis("tokens", {4096}, {256})
    .axis("width", {768}, {128})
    .axis("gpu_seq", {512, 1024, 2048, 4096, 8192}, {256})
    .axis("gpu_tokens", {16384}, {512})
    .axis("gpu_width", {2048}, {128})
    .takes({flag::peer(),
            FlagSpec{"--pass", "forward, backward or both", "pass", true, FlagSpec::Parse::words, 0, {"forward", "backward"}},
            FlagSpec{"--causal", "true, false or both", "causal", true, FlagSpec::Parse::words, 0, {"true", "false"}},
            FlagSpec{"--seq-len", "sequence lengths (CPU; gpu_seq on the GPU)", "seq", true, FlagSpec::Parse::ints, 1 << 16},
            FlagSpec{"--head-dim", "head dimensions", "head_dim", true, FlagSpec::Parse::ints, 256}})
    .cases(expand);

}  // namespace dlb::bench
