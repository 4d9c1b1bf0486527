// The amp suite's GPU kernel cases (see amp_kernels.h), moved out of bench/amp.cpp unchanged.
#include "bench/amp_kernels.h"

#ifdef DLB_HAVE_CUDA
#include <cublas_v2.h>

#include <vector>

#include "bench/gpu_timing.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cuda/amp_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "models/half.h"

namespace dlb::bench {

namespace {

// ---- op "gemm" (GPU): cuBLAS GemmEx, fp32 accumulation; inputs cast on the device by our kernels ----
class GemmAmpGpu final : public Case {
 public:
  GemmAmpGpu(int dev, long n, DType t) : dev_(dev), n_(n), t_(t) {}
  void setup() override {
    std::string why;
    if (!cuda::device_available(&why)) throw Unsupported("no CUDA device: " + why);
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    l2_bytes_ = device_l2_bytes(dev_);
    const std::size_t nn = std::size_t(n_) * n_;
    ha_.resize(nn), hb_.resize(nn);
    fill_uniform(ha_.data(), nn, 11), fill_uniform(hb_.data(), nn, 12);
    // the values the GPU multiplies: rounded to the input type (tf32 inputs are rounded by the
    // tensor cores; the fp32 product reference is within tf32's tolerance)
    if (models::is_half(t_)) models::round_to(t_, ha_.data(), nn), models::round_to(t_, hb_.data(), nn);
    a_ = cuda::DeviceBuffer<float>(nn), b_ = cuda::DeviceBuffer<float>(nn), c_ = cuda::DeviceBuffer<float>(nn);
    a_.upload(ha_.data(), nn), b_.upload(hb_.data(), nn);
    if (models::is_half(t_)) {
      ah_ = cuda::DeviceBuffer<std::uint16_t>(nn), bh_ = cuda::DeviceBuffer<std::uint16_t>(nn);
      if (t_ == DType::fp16) cuda::amp_cast_fp32_to_fp16(a_.data(), ah_.data(), nn), cuda::amp_cast_fp32_to_fp16(b_.data(), bh_.data(), nn);
      else cuda::amp_cast_fp32_to_bf16(a_.data(), ah_.data(), nn), cuda::amp_cast_fp32_to_bf16(b_.data(), bh_.data(), nn);
      DLB_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void enqueue() {
    const float one = 1.0f, zero = 0.0f;
    const int n = static_cast<int>(n_);
    // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
    const cudaDataType_t in = t_ == DType::fp16 ? CUDA_R_16F : t_ == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t ct = t_ == DType::fp32   ? CUBLAS_COMPUTE_32F
                                   : t_ == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                       : CUBLAS_COMPUTE_32F;
    const void* A = models::is_half(t_) ? static_cast<const void*>(ah_.data()) : a_.data();
    const void* B = models::is_half(t_) ? static_cast<const void*>(bh_.data()) : b_.data();
    cublasHandle_t h = cuda::cublas_handle_on(nullptr);
    DLB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, in, n, A, in, n, &zero, c_.data(),
                                  CUDA_R_32F, n, ct, CUBLAS_GEMM_DEFAULT));
  }
  CheckResult verify() override {
    enqueue();
    std::vector<float> c(std::size_t(n_) * n_);
    c_.download(c.data(), c.size());
    return cpu::check_gemm(ha_.data(), hb_.data(), c.data(), n_, n_, n_, t_);  // ha_, hb_: the rounded inputs
  }
  // N back-to-back GEMMs per event pair (bench/gpu_timing.h); the timer's events are made on first
  // use, after setup()'s cudaSetDevice.
  double run() override { return timer_.time([this] { enqueue(); }); }
  long calls_per_run() const override { return timer_.calls(); }
  bool manual_time() const override { return true; }
  Work work() const override { return {2.0 * n_ * n_ * n_, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void annotate(json& e) const override {
    e["impl"] = "cublasGemmEx";
    e["peak_device_bytes"] = cuda::peak_device_bytes();
    timer_.annotate(e);
    const double nn = double(n_) * double(n_);
    note_l2(e, nn * (models::is_half(t_) ? 2.0 * 2 : 4.0 * 2) + nn * 4.0, l2_bytes_);
  }
  void teardown() override {
    timer_.release();
    a_ = {}, b_ = {}, c_ = {}, ah_ = {}, bh_ = {};
  }

 private:
  int dev_;
  long n_;
  DType t_;
  std::vector<float> ha_, hb_;
  cuda::DeviceBuffer<float> a_, b_, c_;
  cuda::DeviceBuffer<std::uint16_t> ah_, bh_;
  GpuCallTimer timer_{dev_};
  double l2_bytes_ = 0;
};

// ---- ops "cast" and "unscale" (GPU): our AMP kernels, bandwidth-bound. Napkin: a cast reads 4 and
// writes 2 bytes per element; the fused unscale + inf/NaN check reads and writes 4. ----
class AmpKernelGpu final : public Case {
 public:
  AmpKernelGpu(int dev, std::string op, DType t, std::size_t n) : dev_(dev), op_(std::move(op)), t_(t), n_(n) {}
  void setup() override {
    std::string why;
    if (!cuda::device_available(&why)) throw Unsupported("no CUDA device: " + why);
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    l2_bytes_ = device_l2_bytes(dev_);
    host_.resize(n_);
    fill_uniform(host_.data(), n_, 31);
    for (auto& v : host_) v *= 70000.0f;  // some values overflow fp16 (a cast must give inf there)
    x_ = cuda::DeviceBuffer<float>(n_);
    x_.upload(host_.data(), n_);
    if (op_ == "cast") h_ = cuda::DeviceBuffer<std::uint16_t>(n_);
    flags_ = cuda::DeviceBuffer<float>(2);
    const float f[2] = {1.0f, 0.0f};  // inv_scale 1 keeps the buffer unchanged across timed runs
    flags_.upload(f, 2);
  }
  void enqueue() {
    if (op_ == "unscale") return cuda::amp_unscale_check(x_.data(), n_, flags_.data(), flags_.data() + 1);
    if (t_ == DType::fp16) cuda::amp_cast_fp32_to_fp16(x_.data(), h_.data(), n_);
    else cuda::amp_cast_fp32_to_bf16(x_.data(), h_.data(), n_);
  }
  CheckResult verify() override {
    enqueue();
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    if (op_ == "unscale") {
      std::vector<float> got(n_);
      float f[2];
      x_.download(got.data(), n_);
      flags_.download(f, 2);
      if (f[1] != 0.0f) return judge(1.0, 0.0, "found_inf set on finite gradients");
      return judge(max_rel_err(got.data(), host_.data(), n_), default_tolerance(DType::fp32));
    }
    std::vector<std::uint16_t> got(n_);
    h_.download(got.data(), n_);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n_; ++i) wrong += got[i] != (t_ == DType::fp16 ? models::to_fp16(host_[i]) : models::to_bf16(host_[i]));
    return judge(double(wrong) / n_, 0.0, std::to_string(wrong) + " values differ from the host reference bits");
  }
  double run() override { return timer_.time([this] { enqueue(); }); }  // bench/gpu_timing.h
  long calls_per_run() const override { return timer_.calls(); }
  bool manual_time() const override { return true; }
  Work work() const override { return {0, double(n_) * (op_ == "cast" ? 6 : 8), 0}; }
  Metric metric() const override { return Metric::gb_per_s; }
  void annotate(json& e) const override {
    e["elements"] = n_;
    timer_.annotate(e);
    note_l2(e, double(n_) * (op_ == "cast" ? 6 : 8), l2_bytes_);  // a bandwidth figure from L2 is not DRAM's
  }
  void teardown() override {
    timer_.release();
    x_ = {}, h_ = {}, flags_ = {};
  }

 private:
  int dev_;
  std::string op_;
  DType t_;
  std::size_t n_;
  std::vector<float> host_;
  cuda::DeviceBuffer<float> x_, flags_;
  cuda::DeviceBuffer<std::uint16_t> h_;
  GpuCallTimer timer_{dev_};
  double l2_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Case> make_gemm_amp_gpu(int device, long n, DType t) { return std::make_unique<GemmAmpGpu>(device, n, t); }
std::unique_ptr<Case> make_amp_kernel_gpu(int device, const std::string& op, DType t, std::size_t n) {
  return std::make_unique<AmpKernelGpu>(device, op, t, n);
}

}  // namespace dlb::bench
#endif
