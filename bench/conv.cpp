// Suite "conv": Conv2d forward, backward-data and backward-filter on every conv layer of the seed
// models, a few DeepBench-style training shapes and a batch sweep of the lecture's conv1.
//   ops     conv2d_fwd, conv2d_bwd_data, conv2d_bwd_filter; conv_transpose2d_fwd for the
//           Autoencoder's transposed convs (= backward-data of the conv with c/k swapped)
//   cpu     impl=im2col (ours: im2col + OpenBLAS sgemm and direct AVX2 kernels, kernels/cpu/conv2d.cpp),
//           fp32; impl=onednn (kernels/cpu/onednn/, NCHW in and out, reorders included), fp32 and
//           bf16 (bf16 inputs, fp32 outputs; record key bf16_compute native|emulated); impl=widen,
//           bf16 on every CPU: the bf16 inputs widened to fp32 (exact, timed), then ours in fp32
//           (bf16_compute emulated: the bf16 row where oneDNN has no bf16 kernel for the ISA)
//   cuda    impl=cudnn (fp32, tf32, fp16, bf16; algorithm search per shape, recorded as "algo"),
//           impl=implicit_gemm (ours, fp32 forward)
// Names: conv/<op>/<device>/<dtype>/impl=<impl>/layer=<layer>/batch=<n>. Every record also has the
// layer's n,c,h,w,k,r,s,pad,stride. Work = Conv2dShape::flops() (2*n*k*p*q*c*r*s) in every direction.
// Verification: the fp64 direct reference over every output when it is cheap (<= kFullCheckFlops),
// else over a seeded random sample of outputs, each computed in fp64 (error relative to the sample's
// scale). Half-precision cases are checked on inputs rounded to their dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "bench/gpu_timing.h"
#include "bench/napkin.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/onednn/onednn.h"

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cuda_util.h"
#endif

namespace dlb::bench {

namespace {

enum class Op { fwd, bwd_data, bwd_filter, transpose_fwd };

const char* op_name(Op op) {
  switch (op) {
    case Op::fwd: return "conv2d_fwd";
    case Op::bwd_data: return "conv2d_bwd_data";
    case Op::bwd_filter: return "conv2d_bwd_filter";
    case Op::transpose_fwd: return "conv_transpose2d_fwd";
  }
  return "?";
}

struct Layer {
  std::string name;
  Conv2dShape sh;        // n is filled per case
  bool transpose = false;  // a ConvTranspose2d, described by the conv it is the adjoint of
  bool deepbench = false;  // fixed batch
};

// A square r x r filter.
Conv2dShape shape(int n, int c, int h, int w, int k, int r, int pad = 0, int stride = 1) {
  return Conv2dShape::make(n, c, h, w, k, r, r, pad, stride);
}

// Every conv layer of the seed models (batch filled in later) and the DeepBench-style shapes.
std::vector<Layer> all_layers() {
  return {
      {"lecture.conv1", shape(1, 3, 32, 32, 128, 5), false, false},   // Net(128): 3->128 5x5, 32x32
      {"lecture.conv2", shape(1, 128, 14, 14, 16, 5), false, false},  // 128->16 5x5 on the pooled 14x14
      {"convnet.conv1", shape(1, 3, 28, 28, 32, 3, 1), false, false},  // fc1 is 64*7*7: 28x28 input
      {"convnet.conv2", shape(1, 32, 14, 14, 64, 3, 1), false, false},
      {"autoencoder.encoder.0", shape(1, 1, 28, 28, 16, 3, 1, 2), false, false},
      {"autoencoder.encoder.2", shape(1, 16, 14, 14, 32, 3, 1, 2), false, false},
      {"autoencoder.encoder.4", shape(1, 32, 7, 7, 64, 7), false, false},
      // ConvTranspose2d(in, out, ...) on an input of size i == the conv (c = out, k = in) on the
      // transposed layer's output, run backward-data.
      {"autoencoder.decoder.0", shape(1, 32, 7, 7, 64, 7), true, false},          // 64->32 k7: 1x1 -> 7x7
      {"autoencoder.decoder.2", shape(1, 16, 14, 14, 32, 3, 1, 2), true, false},  // 32->16 s2: 7 -> 14
      {"autoencoder.decoder.4", shape(1, 1, 28, 28, 16, 3, 1, 2), true, false},   // 16->1 s2: 14 -> 28
      {"deepbench.n16_c64_56_k64_3x3", shape(16, 64, 56, 56, 64, 3, 1), false, true},
      {"deepbench.n16_c128_28_k128_3x3", shape(16, 128, 28, 28, 128, 3, 1), false, true},
      {"deepbench.n8_c256_14_k256_3x3", shape(8, 256, 14, 14, 256, 3, 1), false, true},
      {"deepbench.n16_c3_224_k64_7x7_s2", shape(16, 3, 224, 224, 64, 7, 3, 2), false, true},
      {"deepbench.n8_c64_28_k64_3x3", shape(8, 64, 28, 28, 64, 3, 1), false, true},  // the --quick one
  };
}

void annotate_shape(json& r, const std::string& layer, const Conv2dShape& s) {
  r["layer"] = layer;
  r["n"] = s.n, r["c"] = s.c, r["h"] = s.h, r["w"] = s.w, r["k"] = s.k, r["r"] = s.r, r["s"] = s.s;
  r["pad"] = s.pad_h, r["stride"] = s.stride_h, r["batch"] = s.n;
  r["p"] = s.p(), r["q"] = s.q();
  napkin::put(r, napkin::conv2d(s, napkin::elem_bytes(r.value("dtype", "fp32"))));
}

std::vector<float> host_floats(std::size_t n, const char* what) {
  try {
    return std::vector<float>(n);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(std::string("host buffer ") + what + " (" + std::to_string(n * 4) + " bytes)");
  }
}

// ---------------------------------------------------------------- verification
// The direct reference costs ~1 ns per FMA; above this the check samples outputs.
constexpr double kFullCheckFlops = 2e8;
constexpr int kSamples = 1500;

// Checks `got` (the direction's output: y, dx or dw, plus db for bwd_filter when given) for inputs
// x, w, dy. bias is added to the forward reference when non-null. tol <= 0: the dtype's default.
CheckResult check_conv(Op op, const Conv2dShape& sh, const float* x, const float* w, const float* dy,
                       const float* bias, const float* got, const float* got_db, DType t, double tol = 0) {
  if (tol <= 0) tol = default_tolerance(t);
  const bool forward = op == Op::fwd;
  const bool data = op == Op::bwd_data || op == Op::transpose_fwd;
  const std::size_t n_out = forward ? sh.y_size() : data ? sh.x_size() : sh.w_size();
  if (sh.flops() <= kFullCheckFlops) {
    std::vector<double> ref(n_out);
    std::vector<double> ref_db(sh.k);
    if (forward) cpu::conv2d_forward_direct(sh, x, w, bias, ref.data());
    else if (data) cpu::conv2d_backward_data_direct(sh, dy, w, ref.data());
    else cpu::conv2d_backward_filter_direct(sh, x, dy, ref.data(), ref_db.data());
    auto res = judge(max_rel_err(got, ref.data(), n_out), tol, "fp64 direct, all outputs");
    if (res.ok && got_db) {
      auto rb = judge(max_rel_err(got_db, ref_db.data(), sh.k), tol, "db (bias gradient)");
      if (!rb.ok) return rb;
    }
    return res;
  }
  // Sampled: the first and last outputs plus kSamples seeded random ones.
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<std::size_t> pick(0, n_out - 1);
  std::vector<std::size_t> idx{0, n_out - 1};
  for (int i = 0; i < kSamples; ++i) idx.push_back(pick(rng));
  std::vector<float> g(idx.size());
  std::vector<double> ref(idx.size());
  const int PQ = sh.p() * sh.q();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    g[i] = got[idx[i]];
    if (forward) ref[i] = cpu::conv2d_forward_direct_at(sh, x, w, idx[i]) + (bias ? bias[idx[i] / PQ % sh.k] : 0.0);
    else if (data) ref[i] = cpu::conv2d_backward_data_direct_at(sh, dy, w, idx[i]);
    else ref[i] = cpu::conv2d_backward_filter_direct_at(sh, x, dy, idx[i]);
  }
  auto res = judge(max_rel_err(g.data(), ref.data(), g.size()), tol,
                   "fp64, " + std::to_string(idx.size()) + " sampled outputs");
  if (res.ok && got_db) {
    std::vector<double> db(sh.k, 0.0);
    for (int n = 0; n < sh.n; ++n)
      for (int k = 0; k < sh.k; ++k)
        for (int j = 0; j < PQ; ++j) db[k] += dy[(std::size_t(n) * sh.k + k) * PQ + j];
    auto rb = judge(max_rel_err(got_db, db.data(), sh.k), tol, "db (bias gradient)");
    if (!rb.ok) return rb;
  }
  return res;
}

const char* verification_name(const Conv2dShape& sh) {
  return sh.flops() <= kFullCheckFlops ? "fp64 direct" : "fp64 sampled";
}

// ---------------------------------------------------------------- CPU
class CpuConv final : public Case {
 public:
  // impl "im2col": ours (kernels/cpu/conv2d/, fp32; the kernel its table picks in `cpu_algo`); "onednn": kernels/cpu/onednn/ (fp32, bf16);
  // "widen": bf16 inputs widened to fp32, then ours.
  CpuConv(Op op, std::string layer, Conv2dShape sh, std::string impl = "im2col", DType t = DType::fp32)
      : op_(op), layer_(std::move(layer)), sh_(sh), impl_(std::move(impl)), t_(t) {}
  void setup() override {
    if (!sh_.valid()) throw UsageError("conv: invalid shape " + sh_.str());
    if (impl_ == "onednn" && !cpu::onednn::available()) throw Unsupported(cpu::onednn::unavailable_reason());
    x_ = host_floats(sh_.x_size(), "x"), w_ = host_floats(sh_.w_size(), "w");
    dy_ = host_floats(sh_.y_size(), "y"), b_ = host_floats(sh_.k, "bias");
    fill_uniform(x_.data(), x_.size(), 1);
    fill_uniform(w_.data(), w_.size(), 2);
    fill_uniform(dy_.data(), dy_.size(), 3);
    fill_uniform(b_.data(), b_.size(), 4);
    if (t_ == DType::bf16) {  // bf16 inputs; the reference sees the rounded values
      for (auto* v : {&x_, &w_, &dy_}) {
        auto& h = v == &x_ ? x16_ : v == &w_ ? w16_ : dy16_;
        h.resize(v->size());
        for (std::size_t i = 0; i < v->size(); ++i) (*v)[i] = cpu::bf16_to_float(h[i] = cpu::float_to_bf16((*v)[i]));
      }
    }
    if (impl_ == "widen") wide_x_ = host_floats(x_.size(), "x"), wide_w_ = host_floats(w_.size(), "w"),
                          wide_dy_ = host_floats(dy_.size(), "dy");
    // Outputs: y overwrites dy_'s twin; dx the size of x; dw the size of w.
    if (op_ == Op::fwd) out_ = host_floats(sh_.y_size(), "y");
    else if (op_ == Op::bwd_filter) out_ = host_floats(sh_.w_size(), "dw"), db_ = host_floats(sh_.k, "db");
    else out_ = host_floats(sh_.x_size(), "dx");
    if (impl_ != "onednn") {  // the row of kernels/cpu/conv2d/algos.cpp that runs, at the ISA in force
      const auto dir = op_ == Op::fwd          ? cpu::ConvDir::forward
                       : op_ == Op::bwd_filter ? cpu::ConvDir::backward_filter
                                               : cpu::ConvDir::backward_data;
      cpu_algo_ = cpu::algo_name(cpu::choose(sh_, dir, cpu::isa_active()));
    }
    run();  // sizes the workspace (builds oneDNN's primitive) outside the timed loop
  }
  CheckResult verify() override {
    std::fill(out_.begin(), out_.end(), std::nanf(""));
    std::fill(db_.begin(), db_.end(), std::nanf(""));  // bwd_filter's db is checked too
    run();
    return check_conv(op_, sh_, x_.data(), w_.data(), dy_.data(), op_ == Op::fwd ? b_.data() : nullptr, out_.data(),
                      op_ == Op::bwd_filter ? db_.data() : nullptr, t_);
  }
  double run() override {
    if (impl_ == "onednn") {
      const bool bf = t_ == DType::bf16;
      const auto d = bf ? cpu::onednn::Dt::bf16 : cpu::onednn::Dt::f32;
      const void* x = bf ? static_cast<const void*>(x16_.data()) : x_.data();
      const void* w = bf ? static_cast<const void*>(w16_.data()) : w_.data();
      const void* dy = bf ? static_cast<const void*>(dy16_.data()) : dy_.data();
      switch (op_) {
        case Op::fwd: cpu::onednn::conv2d_forward(sh_, d, x, w, b_.data(), out_.data()); break;
        case Op::bwd_data:
        case Op::transpose_fwd: cpu::onednn::conv2d_backward_data(sh_, d, dy, w, out_.data()); break;
        case Op::bwd_filter: cpu::onednn::conv2d_backward_filter(sh_, d, x, dy, out_.data(), db_.data()); break;
      }
      impl_info_ = cpu::onednn::last_impl();
      return 0;
    }
    const float *x = x_.data(), *w = w_.data(), *dy = dy_.data();
    if (impl_ == "widen") {  // the operands this op reads, from their bf16 bits (x_/w_/dy_ hold the same values)
      const bool need_x = op_ != Op::bwd_data && op_ != Op::transpose_fwd, need_w = op_ != Op::bwd_filter;
      if (need_x) cpu::cast_bf16_to_fp32(x16_.data(), wide_x_.data(), x16_.size()), x = wide_x_.data();
      if (need_w) cpu::cast_bf16_to_fp32(w16_.data(), wide_w_.data(), w16_.size()), w = wide_w_.data();
      if (op_ != Op::fwd) cpu::cast_bf16_to_fp32(dy16_.data(), wide_dy_.data(), dy16_.size()), dy = wide_dy_.data();
    }
    switch (op_) {
      case Op::fwd: cpu::conv2d_forward_im2col(sh_, x, w, b_.data(), out_.data(), ws_); break;
      case Op::bwd_data:
      case Op::transpose_fwd: cpu::conv2d_backward_data_im2col(sh_, dy, w, out_.data(), ws_); break;
      case Op::bwd_filter: cpu::conv2d_backward_filter_im2col(sh_, x, dy, out_.data(), db_.data(), ws_); break;
    }
    return 0;
  }
  Work work() const override { return {sh_.flops(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, layer_, sh_);
    r["verification"] = verification_name(sh_);
    if (impl_ == "onednn") {
      r["onednn_version"] = cpu::onednn::version();
      r["onednn_isa"] = cpu::onednn::isa();
      r["onednn_impl"] = impl_info_;  // the kernel oneDNN chose ("jit:avx512_core", "gemm:jit", ...)
      if (t_ == DType::bf16) r["bf16_compute"] = cpu::onednn::bf16_native() ? "native" : "emulated";
    } else {
      r["workspace_bytes"] = ws_.size() * sizeof(float);
      r["cpu_algo"] = cpu_algo_;
      if (impl_ == "widen") r["bf16_compute"] = "emulated";
    }
  }
  void teardown() override {
    x_ = {}, w_ = {}, dy_ = {}, b_ = {}, out_ = {}, db_ = {}, ws_ = {};
    x16_ = {}, w16_ = {}, dy16_ = {}, wide_x_ = {}, wide_w_ = {}, wide_dy_ = {};
  }

 private:
  Op op_;
  std::string layer_;
  Conv2dShape sh_;
  std::string impl_;
  DType t_;
  std::string impl_info_;
  std::string cpu_algo_;  // impl im2col / widen: the algorithm our table picks (algo_name)
  std::vector<float> x_, w_, dy_, b_, out_, db_, ws_;
  std::vector<float> wide_x_, wide_w_, wide_dy_;  // impl=widen: the bf16 inputs widened, each run
  std::vector<std::uint16_t> x16_, w16_, dy16_;
};

#ifdef DLB_HAVE_CUDA
// ---------------------------------------------------------------- GPU
class GpuConv final : public Case {
 public:
  GpuConv(int dev, Op op, std::string layer, Conv2dShape sh, std::string impl, DType t)
      : dev_(dev), op_(op), layer_(std::move(layer)), sh_(sh), impl_(std::move(impl)), t_(t) {}
  void setup() override {
    if (!sh_.valid()) throw UsageError("conv: invalid shape " + sh_.str());
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    x_ = host_floats(sh_.x_size(), "x"), w_ = host_floats(sh_.w_size(), "w");
    dy_ = host_floats(sh_.y_size(), "dy"), b_ = host_floats(sh_.k, "bias");
    fill_uniform(x_.data(), x_.size(), 1);
    fill_uniform(w_.data(), w_.size(), 2);
    fill_uniform(dy_.data(), dy_.size(), 3);
    fill_uniform(b_.data(), b_.size(), 4);
    half_ = t_ == DType::fp16 || t_ == DType::bf16;
    esz_ = half_ ? 2 : 4;
    dx_ = upload(x_), dw_ = upload(w_), ddy_ = upload(dy_), db_ = upload(b_);
    const std::size_t n_out = op_ == Op::fwd ? sh_.y_size() : op_ == Op::bwd_filter ? sh_.w_size() : sh_.x_size();
    out_ = cuda::DeviceBuffer<unsigned char>(n_out * esz_);
    if (op_ == Op::bwd_filter) dbias_ = cuda::DeviceBuffer<unsigned char>(std::size_t(sh_.k) * esz_);
    if (impl_ == "cudnn") conv_ = std::make_unique<cuda::CudnnConv2d>(sh_, t_);
    l2_bytes_ = device_l2_bytes(dev_);
    launch();  // algorithm search and workspace outside the timed loop
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  CheckResult verify() override {
    DLB_CUDA_CHECK(cudaMemset(out_.data(), 0xff, out_.bytes()));  // NaN: a kernel that writes nothing fails
    if (dbias_.data()) DLB_CUDA_CHECK(cudaMemset(dbias_.data(), 0xff, dbias_.bytes()));  // db is checked too
    launch();
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got = download(out_), gdb;
    if (op_ == Op::bwd_filter) gdb = download(dbias_);
    return check_conv(op_, sh_, x_.data(), w_.data(), dy_.data(), op_ == Op::fwd ? b_.data() : nullptr, got.data(),
                      op_ == Op::bwd_filter ? gdb.data() : nullptr, t_, tolerance());
  }
  // cuDNN: the chosen algorithm's (fp32 through FFT/Winograd is looser, CudnnConv2d::tolerance);
  // our kernel: the dtype's.
  double tolerance() const { return conv_ ? conv_->tolerance(direction()) : default_tolerance(t_); }
  cuda::ConvDir direction() const {
    return op_ == Op::fwd ? cuda::ConvDir::forward
           : op_ == Op::bwd_filter ? cuda::ConvDir::backward_filter
                                   : cuda::ConvDir::backward_data;
  }
  // N back-to-back convolutions per event pair (bench/gpu_timing.h); verify() checked the first result.
  double run() override { return timer_.time([this] { launch(); }); }
  long calls_per_run() const override { return timer_.calls(); }
  bool manual_time() const override { return true; }
  Work work() const override { return {sh_.flops(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, layer_, sh_);
    r["verification"] = verification_name(sh_);
    if (conv_) {
      r["algo"] = conv_->algo_name(direction());
    }
    timer_.annotate(r);
    // What one call reads and writes (cuDNN's workspace not counted).
    const double x = double(sh_.x_size()), w = double(sh_.w_size()), y = double(sh_.y_size());
    const double elems = op_ == Op::fwd ? x + w + y + sh_.k : op_ == Op::bwd_filter ? x + y + w + sh_.k : y + w + x;
    note_l2(r, elems * double(esz_), l2_bytes_);
  }
  void teardown() override {
    conv_.reset(), timer_.release();
    dx_ = {}, dw_ = {}, ddy_ = {}, db_ = {}, out_ = {}, dbias_ = {};
    x_ = {}, w_ = {}, dy_ = {}, b_ = {};
  }

 private:
  // Host values are rounded to the dtype in place, so the reference sees what the GPU sees.
  cuda::DeviceBuffer<unsigned char> upload(std::vector<float>& v) {
    cuda::DeviceBuffer<unsigned char> d(v.size() * esz_);
    if (!half_) {
      DLB_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
      return d;
    }
    std::vector<std::uint16_t> h(v.size());
    const bool bf = t_ == DType::bf16;
    for (std::size_t i = 0; i < v.size(); ++i) {
      h[i] = bf ? cpu::float_to_bf16(v[i]) : cpu::float_to_fp16(v[i]);
      v[i] = bf ? cpu::bf16_to_float(h[i]) : cpu::fp16_to_float(h[i]);
    }
    DLB_CUDA_CHECK(cudaMemcpy(d.data(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
    return d;
  }
  std::vector<float> download(const cuda::DeviceBuffer<unsigned char>& d) const {
    std::vector<float> v(d.bytes() / esz_);
    if (!half_) {
      DLB_CUDA_CHECK(cudaMemcpy(v.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost));
      return v;
    }
    std::vector<std::uint16_t> h(v.size());
    DLB_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = t_ == DType::bf16 ? cpu::bf16_to_float(h[i]) : cpu::fp16_to_float(h[i]);
    return v;
  }
  void launch() {
    if (impl_ == "implicit_gemm") {
      cuda::conv2d_forward_implicit_gemm(sh_, reinterpret_cast<const float*>(dx_.data()),
                                         reinterpret_cast<const float*>(dw_.data()),
                                         reinterpret_cast<const float*>(db_.data()),
                                         reinterpret_cast<float*>(out_.data()));
      return;
    }
    switch (op_) {
      case Op::fwd: conv_->forward(dx_.data(), dw_.data(), db_.data(), out_.data()); break;
      case Op::bwd_data:
      case Op::transpose_fwd: conv_->backward_data(ddy_.data(), dw_.data(), out_.data()); break;
      case Op::bwd_filter: conv_->backward_filter(dx_.data(), ddy_.data(), out_.data(), dbias_.data()); break;
    }
  }

  int dev_;
  Op op_;
  std::string layer_;
  Conv2dShape sh_;
  std::string impl_;
  DType t_;
  bool half_ = false;
  std::size_t esz_ = 4;
  std::vector<float> x_, w_, dy_, b_;
  cuda::DeviceBuffer<unsigned char> dx_, dw_, ddy_, db_, out_, dbias_;
  std::unique_ptr<cuda::CudnnConv2d> conv_;
  GpuCallTimer timer_{dev_};
  double l2_bytes_ = 0;
};
#endif

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// After the run: oneDNN against ours (impl=im2col) per op, layer and batch, fp32 on the CPU, and
// the bf16 rows beside them (oneDNN's, and ours widened).
void summarize(const std::vector<json>& records, std::ostream& out) {
  auto key = [](const json& r) {
    return r.value("op", "") + " | " + r.value("layer", "") + " | " + std::to_string(r.value("batch", 0));
  };
  std::map<std::string, double> ours, dnn, dnn16, wide16;
  for (const auto& r : records) {
    if (r.value("device", "") != "cpu" || !r.contains("gflops")) continue;
    const std::string impl = r.value("impl", ""), dt = r.value("dtype", "");
    const double g = r.at("gflops").get<double>();
    if (impl == "im2col" && dt == "fp32") ours[key(r)] = g;
    if (impl == "onednn" && dt == "fp32") dnn[key(r)] = g;
    if (impl == "onednn" && dt == "bf16") dnn16[key(r)] = g;
    if (impl == "widen" && dt == "bf16") wide16[key(r)] = g;
  }
  bool header = false;
  for (const auto& [k, g] : ours) {
    auto d = dnn.find(k);
    if (d == dnn.end() || !(g > 0)) continue;
    if (!header)
      out << "\n### conv (CPU, fp32): ours (im2col + direct kernels) vs oneDNN; the bf16 rows (GFLOP/s)\n\n"
          << "| op | layer | batch | ours GFLOP/s | oneDNN GFLOP/s | oneDNN / ours | winner | oneDNN bf16 | widened bf16 |\n"
          << "|----|-------|-------|--------------|----------------|---------------|--------|-------------|--------------|\n";
    header = true;
    const double ratio = d->second / g;
    auto cell = [&key = k](const std::map<std::string, double>& m) {  // clang 14: no structured binding in a capture
      const auto it = m.find(key);
      return it == m.end() ? std::string("-") : std::to_string(int(it->second + 0.5));
    };
    char buf[320];
    std::snprintf(buf, sizeof buf, "| %s | %.1f | %.1f | %.2f | %s | %s | %s |\n", k.c_str(), g, d->second, ratio,
                  ratio > 1.1 ? "oneDNN" : ratio < 1 / 1.1 ? "ours" : "within 10%", cell(dnn16).c_str(),
                  cell(wide16).c_str());
    out << buf;
  }
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  const auto dtypes = axis_strings(o, "dtype");
  const auto layer_names = axis_strings(o, "layer");
  const auto ops = axis_strings(o, "op");
  std::vector<long long> layer_batch = axis_ints(o, "layer_batch");
  const auto sweep = axis_ints(o, "batch");
  const auto sweep_layers = axis_strings(o, "sweep_layer");  // --quick: none
  // --batch replaces the sweep and the model layers' batches, and drops the fixed-batch shapes.
  const bool batch_overridden = o.was_given("batch");
  if (batch_overridden) layer_batch = sweep;
  const auto deepbench_names = axis_strings(o, "deepbench");

  // (layer, shape) pairs in order, without duplicates.
  std::vector<std::pair<Layer, Conv2dShape>> todo;
  std::set<std::string> seen;
  auto push = [&](const Layer& l, int n) {
    Conv2dShape sh = l.sh;
    sh.n = n;
    if (!sh.valid()) throw UsageError("conv: invalid shape for " + l.name + ": " + sh.str());
    if (seen.insert(l.name + "/" + std::to_string(n)).second) todo.push_back({l, sh});
  };
  const auto layers = all_layers();
  for (const auto& l : layers) {
    if (l.deepbench) {
      if (batch_overridden || !contains(deepbench_names, l.name)) continue;
      push(l, l.sh.n);
      continue;
    }
    if (!contains(layer_names, l.name)) continue;
    for (long long b : layer_batch) push(l, int(b));
  }
  for (const auto& l : layers)
    if (contains(sweep_layers, l.name))
      for (long long b : sweep) push(l, int(b));

  std::vector<CaseSpec> cases;
  auto add = [&](const std::string& dev, DType t, const std::string& impl, Op op, const Layer& l,
                 const Conv2dShape& sh, std::function<std::unique_ptr<Case>()> make) {
    if (!contains(dtypes, dtype_name(t))) return;
    CaseId id{"conv", op_name(op), dev, dtype_name(t), {}};
    id.with("impl", impl).with("layer", l.name).with("batch", sh.n);
    cases.push_back({id, std::move(make)});
  };
  auto ops_of = [&](const Layer& l) {
    std::vector<Op> v;
    if (l.transpose) {
      if (contains(ops, "conv2d_fwd") || contains(ops, "conv_transpose2d_fwd")) v.push_back(Op::transpose_fwd);
      return v;
    }
    if (contains(ops, "conv2d_fwd")) v.push_back(Op::fwd);
    if (contains(ops, "conv2d_bwd_data")) v.push_back(Op::bwd_data);
    if (contains(ops, "conv2d_bwd_filter")) v.push_back(Op::bwd_filter);
    return v;
  };
  for (const auto& dev : o.devices) {
    for (const auto& [l, sh] : todo)
      for (Op op : ops_of(l)) {
        if (dev == "cpu") {
          add(dev, DType::fp32, "im2col", op, l, sh,
              [op, name = l.name, sh = sh] { return std::make_unique<CpuConv>(op, name, sh); });
          for (DType t : {DType::fp32, DType::bf16})
            add(dev, t, "onednn", op, l, sh,
                [op, name = l.name, sh = sh, t] { return std::make_unique<CpuConv>(op, name, sh, "onednn", t); });
          // bf16 without bf16 instructions, on every CPU (oneDNN 2.6 has no bf16 conv at AVX2): the
          // emulation the amp suite's CPU step runs there; beside a native row, "does bf16 pay here?".
          add(dev, DType::bf16, "widen", op, l, sh,
              [op, name = l.name, sh = sh] { return std::make_unique<CpuConv>(op, name, sh, "widen", DType::bf16); });
          continue;
        }
#ifdef DLB_HAVE_CUDA
        if (!is_gpu(dev)) continue;
        const int g = gpu_index(dev);
        for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16})
          add(dev, t, "cudnn", op, l, sh,
              [g, op, name = l.name, sh, t] { return std::make_unique<GpuConv>(g, op, name, sh, "cudnn", t); });
        if (op == Op::fwd)
          add(dev, DType::fp32, "implicit_gemm", op, l, sh, [g, op, name = l.name, sh] {
            return std::make_unique<GpuConv>(g, op, name, sh, "implicit_gemm", DType::fp32);
          });
#endif
      }
  }
  return cases;
}

}  // namespace

DLB_SUITE(conv)
    .about("Conv2d fwd / bwd-data / bwd-filter: im2col+OpenBLAS, oneDNN, cuDNN (searched algo), our implicit GEMM")
    // The seed models' conv layers, each at the batches of `layer_batch`.
    .axis("layer",
          {"lecture.conv1", "lecture.conv2", "convnet.conv1", "convnet.conv2", "autoencoder.encoder.0",
           "autoencoder.encoder.2", "autoencoder.encoder.4", "autoencoder.decoder.0", "autoencoder.decoder.2",
           "autoencoder.decoder.4"},
          {"lecture.conv1", "lecture.conv2"})
    .axis("layer_batch", {64, 4, 2}, {64, 4})
    // DeepBench's fixed-batch shapes (--batch drops them).
    .axis("deepbench",
          {"deepbench.n16_c64_56_k64_3x3", "deepbench.n16_c128_28_k128_3x3", "deepbench.n8_c256_14_k256_3x3",
           "deepbench.n16_c3_224_k64_7x7_s2"},
          {"deepbench.n8_c64_28_k64_3x3"})
    // The batch sweep of `sweep_layer` (--batch: the batches of every model layer).
    .axis("sweep_layer", {"lecture.conv1"}, json::array())
    .axis("batch", {1, 2, 4, 8, 16, 32, 64, 128, 256})
    .axis("op", {"conv2d_fwd", "conv2d_bwd_data", "conv2d_bwd_filter"})
    .axis("dtype", {"fp32", "tf32", "fp16", "bf16"})
    .takes({flag::batch(), flag::dtype()})
    .cases(expand)
    .summary(summarize);

}  // namespace dlb::bench
