// Suite "matmul": C = A B (row-major, A m x k, B k x n) on the CPU and every GPU.
//   cpu   impl=openblas (fp32 sgemm on the best OpenBLAS core, see kernels/cpu/openblas_core.h;
//         bf16 sbgemm where the library has it), impl=blocked (ours, one thread), impl=onednn (fp32,
//         bf16: native vdpbf16ps on avx512_bf16 CPUs, record key bf16_compute), impl=widen (bf16
//         emulated: widened to fp32, then OpenBLAS sgemm; on every CPU)
//   cuda  impl=cublas (fp32 without TF32, tf32, fp16, bf16), our fp32 kernels (one case per row of
//         cuda::sgemm_kernels(), kernels/cuda/gemm_sgemm.cu), our tensor-core kernels (one case per row
//         of cuda::hgemm_kernels(), kernels/cuda/gemm_tc.cu: impl=mma, mma_256; fp16, bf16)
//   cpu   impl=openblas-core, core=<Core>: the same sgemm under each other OpenBLAS kernel set this
//         CPU can run (openblas_sgemm_candidates), for squares of 1024..4096, so one run shows how
//         the default core compares with the best one. OpenBLAS reads OPENBLAS_CORETYPE only when
//         it loads, so each is measured by a child dlbench (its own verification and timing; the
//         child's per-repetition times are reported here).
// Names: matmul/gemm/<device>/<dtype>/impl=<impl>/size=<n> for squares (m = n = k) and
// .../impl=<impl>/m=<m>/n=<n>/k=<k> for the rectangular (DeepBench-style) shapes; every record also
// carries m, n, k. Work = 2mnk flop. Every case is verified (kernels/cpu/gemm_ref.h: fp64 entry by
// entry when small, Freivalds + exact rows when large) before it is timed.
#include <cblas.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "bench/gpu_timing.h"
#include "kernels/common/safe_file.h"
#include "kernels/common/child.h"
#include "bench/napkin.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cpu/memcpy.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/openblas_core.h"

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gemm_sgemm.h"
#include "kernels/cuda/gemm_tc.h"
#endif

namespace dlb::bench {

namespace {

struct Shape {
  long long m, n, k;
  bool square;
  double mnk() const { return double(m) * double(n) * double(k); }
};

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

// Refuse up front what cannot fit (instead of letting the kernel's OOM killer end the sweep), and
// dimensions the BLAS interfaces (32-bit int) cannot express. Available = MemAvailable (free pages
// plus the page cache the kernel can drop), not MemFree, which a warm page cache makes look full.
void check_host_memory(const Shape& s, double bytes) {
  const double avail = double(cpu::host_available_bytes());
  if (avail > 0 && bytes > 0.8 * avail)
    throw OutOfMemory(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " needs " +
                      gib(bytes) + " of host memory, " + gib(avail) + " available");
  if (s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
    throw OutOfMemory("dimension beyond 2^31-1: " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                      std::to_string(s.k));
}

std::vector<float> host_floats(std::size_t n, const char* what) {
  try {
    return std::vector<float>(n);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(std::string("host buffer ") + what + " (" + gib(double(n) * 4) + ")");
  }
}

void annotate_shape(json& r, const Shape& s) {
  r["m"] = s.m, r["n"] = s.n, r["k"] = s.k;
  napkin::put(r, napkin::gemm(s.m, s.n, s.k, napkin::elem_bytes(r.value("dtype", "fp32"))));
}

// ---------------------------------------------------------------- CPU
class CpuGemm final : public Case {
 public:
  CpuGemm(Shape s, std::string impl, DType t) : s_(s), impl_(std::move(impl)), t_(t) {}
  void setup() override {
    if (impl_ == "onednn" && !cpu::onednn::available()) throw Unsupported(cpu::onednn::unavailable_reason());
    if (t_ == DType::bf16 && impl_ == "openblas") {
      const std::string why = cpu::cpu_bf16_gemm_unsupported_reason();
      if (!why.empty()) throw Unsupported("bf16 GEMM on CPU: " + why);
    }
    const std::size_t mk = s_.m * s_.k, kn = s_.k * s_.n, mn = s_.m * s_.n;
    check_host_memory(s_, 4.0 * (mk + kn + mn) + (t_ == DType::bf16 ? 2.0 * (mk + kn) : 0.0));
    a_ = host_floats(mk, "A"), b_ = host_floats(kn, "B"), c_ = host_floats(mn, "C");
    fill_uniform(a_.data(), mk, 1);
    fill_uniform(b_.data(), kn, 2);
    if (t_ == DType::bf16) {  // the reference multiplies the rounded values
      try {
        a16_.resize(mk), b16_.resize(kn);
      } catch (const std::bad_alloc&) {
        throw OutOfMemory("bf16 copies of A and B");
      }
      for (std::size_t i = 0; i < mk; ++i) a_[i] = cpu::bf16_to_float(a16_[i] = cpu::float_to_bf16(a_[i]));
      for (std::size_t i = 0; i < kn; ++i) b_[i] = cpu::bf16_to_float(b16_[i] = cpu::float_to_bf16(b_[i]));
    }
  }
  CheckResult verify() override {
    run();
    return cpu::check_gemm(a_.data(), b_.data(), c_.data(), s_.m, s_.n, s_.k, t_);
  }
  double run() override {
    if (impl_ == "onednn") {
      cpu::onednn::Gemm g;
      g.dt = t_ == DType::bf16 ? cpu::onednn::Dt::bf16 : cpu::onednn::Dt::f32;
      g.m = s_.m, g.n = s_.n, g.k = s_.k;
      g.a = t_ == DType::bf16 ? static_cast<const void*>(a16_.data()) : a_.data();
      g.b = t_ == DType::bf16 ? static_cast<const void*>(b16_.data()) : b_.data();
      g.c = c_.data();
      cpu::onednn::gemm(g);
    } else if (impl_ == "widen") {
      cpu::Bf16GemmArgs g;
      g.m = long(s_.m), g.n = long(s_.n), g.k = long(s_.k);
      g.a = a16_.data(), g.b = b16_.data(), g.c = c_.data();
      cpu::bf16_gemm_forward_widen_sgemm(g);
    } else if (t_ == DType::bf16) cpu::sbgemm_forward_openblas(a16_.data(), b16_.data(), c_.data(), s_.m, s_.n, s_.k);
    else if (impl_ == "blocked") cpu::sgemm_forward_blocked(a_.data(), b_.data(), c_.data(), s_.m, s_.n, s_.k);
    else cpu::sgemm_forward_openblas(a_.data(), b_.data(), c_.data(), s_.m, s_.n, s_.k);
    return 0;
  }
  Work work() const override { return {2.0 * s_.mnk(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, s_);
    r["verification"] = s_.mnk() <= cpu::kExactCheckMaxMNK ? "fp64" : "freivalds+rows";
    // bf16: native dot products (vdpbf16ps) or converted to fp32 inside the library ("emulated");
    // impl=widen is the emulation itself
    if (t_ == DType::bf16)
      r["bf16_compute"] = impl_ == "widen"    ? "emulated"
                          : impl_ == "onednn" ? (cpu::onednn::bf16_native() ? "native" : "emulated")
                                              : "native";
    if (impl_ == "openblas" || impl_ == "widen") {
      const auto st = cpu::openblas_core_status();
      r["openblas_core"] = st.core;  // the kernel set that ran
      r["openblas_core_mode"] = st.mode;
      if (!st.library_core.empty()) r["openblas_library_core"] = st.library_core;
      r["cpu_threads"] = openblas_get_num_threads();
    } else if (impl_ == "onednn") {
      r["onednn_version"] = cpu::onednn::version();
      r["onednn_isa"] = cpu::onednn::isa();
      r["onednn_impl"] = cpu::onednn::last_impl();
    } else {
      r["cpu_threads"] = 1;
    }
  }
  void teardown() override { a_ = {}, b_ = {}, c_ = {}, a16_ = {}, b16_ = {}; }

 private:
  Shape s_;
  std::string impl_;
  DType t_;
  std::vector<float> a_, b_, c_;
  std::vector<std::uint16_t> a16_, b16_;
};

// The child's environment marker: a probe run adds no probes of its own.
constexpr const char* kProbeEnv = "DLBENCH_CORE_PROBE";

// Removes TMP/dlbench-core-<pid>-* folders whose run (pid) is gone.
void remove_stale_probe_dirs(const std::string& tmp) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tmp, ec)) {
    const std::string n = e.path().filename().string(), prefix = "dlbench-core-";
    if (n.rfind(prefix, 0) != 0) continue;
    const std::size_t dash = n.find('-', prefix.size());
    if (dash == std::string::npos) continue;
    const std::string pid = n.substr(prefix.size(), dash - prefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(std::stoi(pid), 0) == 0 || errno == EPERM) continue;  // still running
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
  }
}

// sgemm n x n x n under another OpenBLAS core: setup() runs `dlbench run --suite matmul --device cpu
// --sizes n --filter impl=openblas/size=n$` with OPENBLAS_CORETYPE=<core> and reads its results.json
// (verification outcome, the core that really ran, per-repetition times); run() replays the times.
class CpuGemmOtherCore final : public Case {
 public:
  CpuGemmOtherCore(Shape s, std::string core, int reps) : s_(s), core_(std::move(core)), reps_(reps) {}
  void setup() override {
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) throw Unsupported("cannot find this executable to run the " + core_ + " probe");
    exe[len] = 0;
    // Its results go to a private folder under $TMPDIR (default /tmp), removed when it ends; one left
    // by a run that was killed (SIGKILL, a second Ctrl-C) is removed by the next probe: its name holds
    // the pid of the run that made it.
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string tmp = tmpdir && *tmpdir ? tmpdir : "/tmp";
    remove_stale_probe_dirs(tmp);
    std::string tmpl = tmp + "/dlbench-core-" + std::to_string(getpid()) + "-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw Unsupported("no temporary folder for the " + core_ + " probe");
    const std::string dir = tmpl, n = std::to_string(s_.m);
    std::string log;
    const int st = run_child({exe, "run", "--suite", "matmul", "--device", "cpu", "--dtype", "fp32", "--sizes", n,
                              "--filter", "impl=openblas/size=" + n + "$", "--repetitions", std::to_string(reps_),
                              "--out", dir, "--no-report"},
                             {"OPENBLAS_CORETYPE=" + core_, std::string(kProbeEnv) + "=1"}, {"DLBENCH_OPENBLAS_CORE"}, &log);
    json results;
    try {  // our own child's file, still through the one safe reader and the JSON depth limit
      results = parse_json_bounded(read_file_safely(dir + "/results.json", 64 << 20), dir + "/results.json");
    } catch (const InputError&) {
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (interrupt_requested()) throw Interrupted("the " + core_ + " probe was interrupted");
    if (results.is_object())
      for (const auto& e : results.value("benchmarks", json::array())) {
        if (e.value("run_type", "") != "iteration") continue;
        secs_.push_back(e.value("real_time", 0.0) * 1e-6);  // time_unit us, per iteration
        ran_ = e.value("openblas_core", ran_);
        err_ = std::max(err_, e.value("max_rel_err", 0.0)), tol_ = e.value("tolerance", tol_);
        verified_ = e.value("verified", false);
      }
    if (secs_.empty()) {
      const auto last = log.find_last_of('\n', log.size() > 1 ? log.size() - 2 : 0);
      throw Unsupported("the " + core_ + " probe failed (exit " + std::to_string(st < 0 ? -1 : WEXITSTATUS(st)) +
                        "): " + log.substr(last == std::string::npos ? 0 : last + 1));
    }
    if (strcasecmp(ran_.c_str(), core_.c_str()) != 0)
      throw Unsupported("OpenBLAS ran " + ran_ + " when asked for " + core_);
  }
  CheckResult verify() override {
    if (!verified_) return judge(std::max(err_, 1.0), tol_, "the " + core_ + " probe's own verification failed");
    return judge(err_, tol_, "sgemm under " + core_ + " (checked by the probe)");
  }
  double run() override { return secs_[next_++ % secs_.size()]; }
  bool manual_time() const override { return true; }
  long iterations() const override { return 1; }
  int repetitions() const override { return int(secs_.empty() ? reps_ : secs_.size()); }
  Work work() const override { return {2.0 * s_.mnk(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, s_);
    r["openblas_core"] = ran_;
    r["openblas_core_mode"] = "probe";
    r["verification"] = s_.mnk() <= cpu::kExactCheckMaxMNK ? "fp64" : "freivalds+rows";
  }

 private:
  Shape s_;
  std::string core_;
  int reps_;
  std::vector<double> secs_;
  std::size_t next_ = 0;
  std::string ran_;
  double err_ = 0, tol_ = 0;
  bool verified_ = false;
};

#ifdef DLB_HAVE_CUDA
// ---------------------------------------------------------------- GPU
class GpuGemm final : public Case {
 public:
  GpuGemm(int dev, Shape s, std::string impl, DType t) : dev_(dev), s_(s), impl_(std::move(impl)), t_(t) {}
  void setup() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    const bool half = t_ == DType::fp16 || t_ == DType::bf16;
    const std::size_t mk = s_.m * s_.k, kn = s_.k * s_.n, mn = s_.m * s_.n;
    check_host_memory(s_, 4.0 * (mk + kn + mn) + (half ? 2.0 * (mk + kn) : 0.0));
    a_ = host_floats(mk, "A"), b_ = host_floats(kn, "B"), c_ = host_floats(mn, "C");
    fill_uniform(a_.data(), mk, 1);
    fill_uniform(b_.data(), kn, 2);
    if (half) {
      std::vector<std::uint16_t> a16(mk), b16(kn);
      auto to16 = t_ == DType::bf16 ? cpu::float_to_bf16 : cpu::float_to_fp16;
      auto from16 = t_ == DType::bf16 ? cpu::bf16_to_float : cpu::fp16_to_float;
      for (std::size_t i = 0; i < mk; ++i) a_[i] = from16(a16[i] = to16(a_[i]));
      for (std::size_t i = 0; i < kn; ++i) b_[i] = from16(b16[i] = to16(b_[i]));
      da16_ = cuda::DeviceBuffer<std::uint16_t>(mk);  // OutOfMemory from device_alloc
      db16_ = cuda::DeviceBuffer<std::uint16_t>(kn);
      da16_.upload(a16.data(), mk);
      db16_.upload(b16.data(), kn);
    } else {
      da_ = cuda::DeviceBuffer<float>(mk);
      db_ = cuda::DeviceBuffer<float>(kn);
      da_.upload(a_.data(), mk);
      db_.upload(b_.data(), kn);
    }
    dc_ = cuda::DeviceBuffer<float>(mn);
    DLB_CUDA_CHECK(cudaMemset(dc_.data(), 0xff, dc_.bytes()));  // NaN: a kernel that writes nothing fails
    l2_bytes_ = device_l2_bytes(dev_);
  }
  CheckResult verify() override {
    launch();
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    dc_.download(c_.data(), c_.size());
    return cpu::check_gemm(a_.data(), b_.data(), c_.data(), s_.m, s_.n, s_.k, t_);
  }
  // N back-to-back products per event pair (bench/gpu_timing.h); verify() checked the first result.
  double run() override { return timer_.time([this] { launch(); }); }
  long calls_per_run() const override { return timer_.calls(); }
  bool manual_time() const override { return true; }
  Work work() const override { return {2.0 * s_.mnk(), 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& r) const override {
    annotate_shape(r, s_);
    r["verification"] = s_.mnk() <= cpu::kExactCheckMaxMNK ? "fp64" : "freivalds+rows";
    r["output_dtype"] = "fp32";
    timer_.annotate(r);
    const double in = (t_ == DType::fp16 || t_ == DType::bf16 ? 2.0 : 4.0) * double(s_.m * s_.k + s_.k * s_.n);
    note_l2(r, in + 4.0 * double(s_.m * s_.n), l2_bytes_);
  }
  void teardown() override {
    timer_.release();
    da_ = {}, db_ = {}, dc_ = {}, da16_ = {}, db16_ = {};
    a_ = {}, b_ = {}, c_ = {};
  }

 private:
  void launch() {
    const int m = static_cast<int>(s_.m), n = static_cast<int>(s_.n), k = static_cast<int>(s_.k);
    if (impl_ == "cublas") {
      switch (t_) {
        case DType::fp32: cuda::cublas_gemm(cuda::CublasGemmMode::fp32, da_.data(), db_.data(), dc_.data(), m, n, k); break;
        case DType::tf32: cuda::cublas_gemm(cuda::CublasGemmMode::tf32, da_.data(), db_.data(), dc_.data(), m, n, k); break;
        case DType::fp16: cuda::cublas_gemm(cuda::CublasGemmMode::fp16, da16_.data(), db16_.data(), dc_.data(), m, n, k); break;
        case DType::bf16: cuda::cublas_gemm(cuda::CublasGemmMode::bf16, da16_.data(), db16_.data(), dc_.data(), m, n, k); break;
        default: throw Unsupported("cublas: dtype not offered");
      }
    } else if (const cuda::HgemmKernel* tc = cuda::find_hgemm_kernel(impl_)) {
      tc->launch(t_ == DType::bf16 ? cuda::HalfType::bf16 : cuda::HalfType::fp16, da16_.data(), db16_.data(),
                 dc_.data(), m, n, k, nullptr);
    } else {
      const cuda::SgemmKernel* kernel = cuda::find_sgemm_kernel(impl_);
      if (!kernel) throw Unsupported("unknown GPU sgemm impl " + impl_);
      cuda::sgemm_forward(*kernel, da_.data(), db_.data(), dc_.data(), m, n, k);
    }
  }

  int dev_;
  Shape s_;
  std::string impl_;
  DType t_;
  std::vector<float> a_, b_, c_;  // host inputs as the kernel sees them (half cases: rounded)
  cuda::DeviceBuffer<float> da_, db_, dc_;
  cuda::DeviceBuffer<std::uint16_t> da16_, db16_;
  GpuCallTimer timer_{dev_};
  double l2_bytes_ = 0;
};
#endif

// The slow kernels only where a run stays short: GPU kernels marked slow in their table up to 4096^3,
// our single-thread CPU kernel up to 1024^3 (~0.1-0.5 s per product).
bool worth_running(const std::string& impl, const Shape& s) {
#ifdef DLB_HAVE_CUDA
  const cuda::SgemmKernel* kernel = cuda::find_sgemm_kernel(impl);
  if (kernel && kernel->slow) return s.mnk() <= 4096.0 * 4096 * 4096;
#endif
  if (impl == "blocked") return s.mnk() <= 1024.0 * 1024 * 1024;
  return true;
}

std::vector<Shape> shapes_of(const SuiteOptions& o) {
  std::vector<Shape> out;
  for (long long n : axis_ints(o, "size")) out.push_back({n, n, n, true});
  // --sizes replaces the square sizes and drops the rectangular shapes.
  if (!o.was_given("size"))
    for (const auto& sh : o.axes.at("shape")) out.push_back({sh[0].get<long long>(), sh[1].get<long long>(), sh[2].get<long long>(), false});
  return out;
}

// The OpenBLAS cores side by side (fp32 sgemm, squares): the one dlbench runs by default (impl=openblas)
// against each other core this CPU offers (impl=openblas-core), as a share of the best measured.
void summarize_cores(const std::vector<json>& records, std::ostream& out) {
  std::map<long long, std::vector<std::pair<std::string, double>>> by_size;  // size -> (core label, GFLOP/s)
  std::map<long long, double> ours;
  for (const auto& r : records) {
    const std::string impl = r.value("impl", "");
    if (!r.contains("gflops") || !r.contains("size") || r.value("dtype", "") != "fp32" || r.value("device", "") != "cpu") continue;
    if (impl != "openblas" && impl != "openblas-core") continue;
    const long long n = r.at("size").get<long long>();
    const double g = r.at("gflops").get<double>();
    std::string label = r.value("openblas_core", "?");
    if (impl == "openblas") label += " (dlbench's default)", ours[n] = g;
    by_size[n].emplace_back(label, g);
  }
  bool header = false;
  std::string verdicts;
  for (const auto& [n, rows] : by_size) {
    if (rows.size() < 2 || !ours.count(n)) continue;
    double best = 0;
    std::string best_core;
    for (const auto& [c, g] : rows)
      if (g > best) best = g, best_core = c;
    if (!header) {
      out << "\n### OpenBLAS kernel sets side by side (fp32 sgemm, this run)\n\n"
          << "|  size | core                              |    GFLOP/s | of best |\n"
          << "|-------|-----------------------------------|------------|---------|\n";
      header = true;
    }
    for (const auto& [c, g] : rows) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "| %5lld | %-33s | %10.1f | %6.1f%% |\n", n, c.c_str(), g, 100.0 * g / best);
      out << buf;
    }
    char buf[200];
    std::snprintf(buf, sizeof buf, "n=%lld: the default core gives %.1f%% of the best measured (%s).\n", n,
                  100.0 * ours[n] / best, best_core.c_str());
    verdicts += buf;
  }
  if (header) out << "\n" << verdicts;
}

// After the run: each implementation against the library on the same device, dtype and shape
// (ours vs cuBLAS, blocked vs OpenBLAS), the ratios the performance goals are stated in.
void summarize(const std::vector<json>& records, std::ostream& out) {
  auto shape_of = [](const json& r) {
    return std::to_string(r.value("m", 0LL)) + "x" + std::to_string(r.value("n", 0LL)) + "x" +
           std::to_string(r.value("k", 0LL));
  };
  // A dispatch_bound case (GpuCallTimer: enqueueing took >= 90% of the device time) measured the
  // host's launch rate, not the kernel: it stays out of the ratios, on either side.
  auto dispatch_bound = [](const json& r) { return r.value("dispatch_bound", false); };
  std::map<std::string, double> library;  // device|dtype|shape -> GFLOP/s of cublas / openblas
  std::set<std::string> library_bound;    // the same keys where the library's case was dispatch_bound
  for (const auto& r : records) {
    const std::string impl = r.value("impl", "");
    if (!r.contains("gflops") || (impl != "cublas" && impl != "openblas")) continue;
    const std::string k = r.value("device", "") + "|" + r.value("dtype", "") + "|" + shape_of(r);
    if (dispatch_bound(r)) library_bound.insert(k);
    else library[k] = r.at("gflops").get<double>();
  }
  std::vector<std::string> lines;
  std::size_t left_out = 0;
  for (const auto& r : records) {
    const std::string impl = r.value("impl", "");
    if (!r.contains("gflops") || impl == "cublas" || impl == "openblas" || impl == "openblas-core") continue;
    const std::string k = r.value("device", "") + "|" + r.value("dtype", "") + "|" + shape_of(r);
    if (dispatch_bound(r) || library_bound.count(k)) {
      ++left_out;
      continue;
    }
    auto it = library.find(k);
    if (it == library.end() || !(it->second > 0)) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf, "| %-8s | %-5s | %-14s | %-10s | %10.1f | %10.1f | %5.1f%% |", r.value("device", "").c_str(),
                  r.value("dtype", "").c_str(), shape_of(r).c_str(), impl.c_str(), r.at("gflops").get<double>(),
                  it->second, 100.0 * r.at("gflops").get<double>() / it->second);
    lines.push_back(buf);
  }
  if (!lines.empty()) {
    out << "\n### matmul: our kernels vs the library (same device, dtype, shape)\n\n"
        << "| device   | dtype | m x n x k      | impl       |    GFLOP/s | library GF |  ratio |\n"
        << "|----------|-------|----------------|------------|------------|------------|--------|\n";
    for (const auto& l : lines) out << l << "\n";
  }
  if (left_out)
    out << "\n" << left_out << " case(s) left out of the ratios: dispatch_bound (ours or the library's timing "
        << "measured kernel launches, not the kernel)\n";
  // CPU bf16 against fp32 OpenBLAS sgemm of the same shape: does bf16 pay on this CPU?
  bool bf16_header = false;
  for (const auto& r : records) {
    if (!r.contains("gflops") || r.value("device", "") != "cpu" || r.value("dtype", "") != "bf16") continue;
    auto it = library.find("cpu|fp32|" + shape_of(r));
    if (it == library.end() || !(it->second > 0)) continue;
    if (!bf16_header) out << "\n### CPU bf16 vs fp32 OpenBLAS sgemm (same shape)\n\n";
    bf16_header = true;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s %s (%s): %.1f GFLOP/s vs sgemm %.1f: %.2fx\n", shape_of(r).c_str(),
                  r.value("impl", "").c_str(), r.value("bf16_compute", "?").c_str(), r.at("gflops").get<double>(),
                  it->second, r.at("gflops").get<double>() / it->second);
    out << buf;
  }
  summarize_cores(records, out);
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  const auto dtypes = axis_strings(o, "dtype");
  auto wanted = [&](const std::string& d) {
    for (const auto& x : dtypes)
      if (x == d) return true;
    return false;
  };
  const auto shapes = shapes_of(o);
  std::vector<CaseSpec> cases;
  auto add = [&](const std::string& dev, const std::string& dtype, const std::string& impl, const Shape& sh,
                 std::function<std::unique_ptr<Case>()> make) {
    if (!wanted(dtype) || !worth_running(impl, sh)) return;
    CaseId id{"matmul", "gemm", dev, dtype, {}};
    id.with("impl", impl);
    if (sh.square) id.with("size", sh.m);
    else id.with("m", sh.m).with("n", sh.n).with("k", sh.k);
    cases.push_back({id, std::move(make)});
  };
  for (const auto& dev : o.devices) {
    if (dev == "cpu") {
      for (const auto& sh : shapes) {
        add(dev, "fp32", "openblas", sh, [sh] { return std::make_unique<CpuGemm>(sh, "openblas", DType::fp32); });
        add(dev, "fp32", "blocked", sh, [sh] { return std::make_unique<CpuGemm>(sh, "blocked", DType::fp32); });
        // OpenBLAS bf16 only where the library has sbgemm (Debian's has not): bf16 runs through oneDNN.
        if (cpu::openblas_has_sbgemm())
          add(dev, "bf16", "openblas", sh, [sh] { return std::make_unique<CpuGemm>(sh, "openblas", DType::bf16); });
        add(dev, "fp32", "onednn", sh, [sh] { return std::make_unique<CpuGemm>(sh, "onednn", DType::fp32); });
        add(dev, "bf16", "onednn", sh, [sh] { return std::make_unique<CpuGemm>(sh, "onednn", DType::bf16); });
        // bf16 without bf16 instructions: widened to fp32 (exact), then OpenBLAS sgemm. What the
        // amp suite's CPU step does where the CPU (or DLB_CPU_ISA) has no avx512_bf16; beside a
        // native row it answers "does bf16 pay on this CPU?", and it runs on every CPU.
        add(dev, "bf16", "widen", sh, [sh] { return std::make_unique<CpuGemm>(sh, "widen", DType::bf16); });
      }
      // The other OpenBLAS cores, after the in-process cases (not inside a probe run).
      if (!std::getenv(kProbeEnv) && wanted("fp32")) {
        const auto st = cpu::openblas_core_status();
        const int reps = o.quick ? 3 : 5;
        const auto cores = cpu::openblas_sgemm_candidates(cpu::read_cpu_flags(), st.library_core);
        for (const auto& sh : shapes) {
          if (!sh.square || sh.m < 1024 || sh.m > 4096) continue;
          for (const auto& core : cores) {
            if (strcasecmp(core.c_str(), st.core.c_str()) == 0) continue;  // that one is impl=openblas
            CaseId id{"matmul", "gemm", dev, "fp32", {}};
            id.with("impl", "openblas-core").with("core", core).with("size", sh.m);
            cases.push_back({id, [sh, core, reps] { return std::make_unique<CpuGemmOtherCore>(sh, core, reps); }});
          }
        }
      }
      continue;
    }
#ifdef DLB_HAVE_CUDA
    if (!is_gpu(dev)) continue;
    const int g = gpu_index(dev);
    auto gpu = [g](Shape sh, const char* impl, DType t) {
      return [g, sh, impl, t] { return std::make_unique<GpuGemm>(g, sh, impl, t); };
    };
    for (const auto& sh : shapes) {
      add(dev, "fp32", "cublas", sh, gpu(sh, "cublas", DType::fp32));
      for (const cuda::SgemmKernel& kernel : cuda::sgemm_kernels())
        add(dev, "fp32", kernel.name, sh, gpu(sh, kernel.name, DType::fp32));
      add(dev, "tf32", "cublas", sh, gpu(sh, "cublas", DType::tf32));
      for (DType t : {DType::bf16, DType::fp16}) {
        add(dev, dtype_name(t), "cublas", sh, gpu(sh, "cublas", t));
        for (const cuda::HgemmKernel& kernel : cuda::hgemm_kernels())
          add(dev, dtype_name(t), kernel.name, sh, gpu(sh, kernel.name, t));
      }
    }
#endif
  }
  return cases;
}

}  // namespace

DLB_SUITE(matmul)
    .about("C = A x B: OpenBLAS sgemm (best core), cuBLAS fp32/tf32/fp16/bf16, our CUDA kernels")
    .axis("size", {128, 256, 512, 1024, 2048, 4096, 8192, 1000, 3000}, {128, 512})
    // DeepBench-style [m, n, k]; --sizes drops them
    .axis("shape", json::array({{1760, 128, 1760}, {2560, 64, 2560}, {4096, 128, 4096}, {7680, 32, 2560}, {512, 1024, 27},
                                {3072, 128, 1024}}),
          json::array({{1760, 128, 1760}}))
    .axis("dtype", {"fp32", "tf32", "fp16", "bf16"})
    .takes({flag::sizes(), flag::dtype()})
    .no_blas_from_pool()  // one sgemm at a time, OpenBLAS's own threads
    .cases(expand)
    .summary(summarize);

}  // namespace dlb::bench
