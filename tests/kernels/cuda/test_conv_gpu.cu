// Conv2d on the GPU against the CPU fp64 direct reference: CudnnConv2d in every dtype and direction
// (forward with bias, backward-data, backward-filter with db), the cached algorithm search, and our
// implicit-GEMM forward kernel. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"

using namespace dlb;

namespace {

std::vector<Conv2dShape> shapes() {
  return {
      Conv2dShape::make(2, 3, 32, 32, 128, 5, 5),         // lecture conv1 at batch 2
      Conv2dShape::make(2, 128, 14, 14, 16, 5, 5),        // lecture conv2
      Conv2dShape::make(3, 5, 9, 11, 7, 3, 3, 1, 2),      // odd sizes, pad + stride
      Conv2dShape::make(1, 1, 28, 28, 16, 3, 3, 1, 2),    // autoencoder encoder.0, c = 1
      Conv2dShape::make(2, 32, 7, 7, 64, 7, 7),           // autoencoder encoder.4 (1x1 output)
      Conv2dShape::make(2, 8, 8, 8, 4, 1, 1),             // pointwise
  };
}

// Device buffer holding `v` in dtype t; v is rounded in place to what the device holds.
struct Dev {
  cuda::DeviceBuffer<unsigned char> buf;
  std::size_t n = 0;
  DType t = DType::fp32;
  bool half() const { return t == DType::fp16 || t == DType::bf16; }
  Dev(std::vector<float>& v, DType dt) : buf(v.size() * (dt == DType::fp16 || dt == DType::bf16 ? 2 : 4)), n(v.size()), t(dt) {
    if (!half()) {
      buf_upload(v.data(), buf.bytes());
      return;
    }
    std::vector<std::uint16_t> h(n);
    for (std::size_t i = 0; i < n; ++i) {
      h[i] = t == DType::bf16 ? cpu::float_to_bf16(v[i]) : cpu::float_to_fp16(v[i]);
      v[i] = t == DType::bf16 ? cpu::bf16_to_float(h[i]) : cpu::fp16_to_float(h[i]);
    }
    buf_upload(h.data(), buf.bytes());
  }
  Dev(std::size_t count, DType dt) : buf(count * (dt == DType::fp16 || dt == DType::bf16 ? 2 : 4)), n(count), t(dt) {
    DLB_CUDA_CHECK(cudaMemset(buf.data(), 0xff, buf.bytes()));  // NaN until written
  }
  void buf_upload(const void* p, std::size_t bytes) {
    DLB_CUDA_CHECK(cudaMemcpy(buf.data(), p, bytes, cudaMemcpyHostToDevice));
  }
  std::vector<float> get() const {
    std::vector<float> v(n);
    if (!half()) {
      DLB_CUDA_CHECK(cudaMemcpy(v.data(), buf.data(), n * 4, cudaMemcpyDeviceToHost));
      return v;
    }
    std::vector<std::uint16_t> h(n);
    DLB_CUDA_CHECK(cudaMemcpy(h.data(), buf.data(), n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) v[i] = t == DType::bf16 ? cpu::bf16_to_float(h[i]) : cpu::fp16_to_float(h[i]);
    return v;
  }
  void* p() const { return buf.data(); }
};

void check_cudnn(DType t) {
  const double tol = default_tolerance(t);
  for (const auto& sh : shapes()) {
    SCOPED_TRACE(sh.str() + " " + dtype_name(t));
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size());
    fill_uniform(x.data(), x.size(), 1);
    fill_uniform(w.data(), w.size(), 2);
    fill_uniform(b.data(), b.size(), 3);
    fill_uniform(dy.data(), dy.size(), 4);
    Dev dx_(x, t), dw_(w, t), db_(b, t), ddy_(dy, t);  // host vectors now hold the rounded values
    Dev y(sh.y_size(), t), gx(sh.x_size(), t), gw(sh.w_size(), t), gb(sh.k, t);
    cuda::CudnnConv2d conv(sh, t);
    EXPECT_EQ(conv.algo_name(cuda::ConvDir::forward), "not searched");

    conv.forward(dx_.p(), dw_.p(), db_.p(), y.p());
    conv.backward_data(ddy_.p(), dw_.p(), gx.p());
    conv.backward_filter(dx_.p(), ddy_.p(), gw.p(), gb.p());
    DLB_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<double> ry(sh.y_size()), rx(sh.x_size()), rw(sh.w_size()), rb(sh.k);
    cpu::conv2d_forward_direct(sh, x.data(), w.data(), b.data(), ry.data());
    cpu::conv2d_backward_data_direct(sh, dy.data(), w.data(), rx.data());
    cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), rw.data(), rb.data());
    // The chosen algorithm's tolerance: the dtype's, looser for fp32 through FFT/Winograd only.
    const double tf = conv.tolerance(cuda::ConvDir::forward), td = conv.tolerance(cuda::ConvDir::backward_data),
                 tw = conv.tolerance(cuda::ConvDir::backward_filter);
    EXPECT_GE(tf, tol);
    EXPECT_LE(tf, t == DType::fp32 ? 2e-4 : tol);
    EXPECT_LE(max_rel_err(y.get().data(), ry.data(), ry.size()), tf) << "forward " << conv.algo_name(cuda::ConvDir::forward);
    EXPECT_LE(max_rel_err(gx.get().data(), rx.data(), rx.size()), td) << "backward data";
    EXPECT_LE(max_rel_err(gw.get().data(), rw.data(), rw.size()), tw) << "backward filter";
    EXPECT_LE(max_rel_err(gb.get().data(), rb.data(), rb.size()), tw) << "bias gradient";
    for (auto d : {cuda::ConvDir::forward, cuda::ConvDir::backward_data, cuda::ConvDir::backward_filter}) {
      const std::string a = conv.algo_name(d);
      EXPECT_NE(a, "not searched");
      EXPECT_EQ(a.find("UNKNOWN"), std::string::npos) << a;
      if (t == DType::fp32) EXPECT_EQ(a.find("TENSOR_OP"), std::string::npos) << "fp32 must not use tensor cores";
    }

    // A second object of the same shape reuses the cached choice and gives the same answer.
    cuda::CudnnConv2d again(sh, t);
    Dev y2(sh.y_size(), t);
    again.forward(dx_.p(), dw_.p(), nullptr, y2.p());
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(again.algo_name(cuda::ConvDir::forward), conv.algo_name(cuda::ConvDir::forward));
    cpu::conv2d_forward_direct(sh, x.data(), w.data(), nullptr, ry.data());
    EXPECT_LE(max_rel_err(y2.get().data(), ry.data(), ry.size()), tf) << "forward without bias";
  }
}

}  // namespace

TEST(ConvGpu, CudnnFp32) {
  SKIP_WITHOUT_GPU();
  check_cudnn(DType::fp32);
}
TEST(ConvGpu, CudnnTf32) {
  SKIP_WITHOUT_GPU();
  check_cudnn(DType::tf32);
}
TEST(ConvGpu, CudnnFp16) {
  SKIP_WITHOUT_GPU();
  check_cudnn(DType::fp16);
}
TEST(ConvGpu, CudnnBf16) {
  SKIP_WITHOUT_GPU();
  check_cudnn(DType::bf16);
}

TEST(ConvGpu, ImplicitGemmForward) {
  SKIP_WITHOUT_GPU();
  auto all = shapes();
  all.push_back(Conv2dShape::make(3, 19, 13, 17, 70, 3, 5, 2, 3));  // nothing a multiple of the 64x64x16 tiles
  for (const auto& sh : all) {
    SCOPED_TRACE(sh.str());
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k);
    fill_uniform(x.data(), x.size(), 1);
    fill_uniform(w.data(), w.size(), 2);
    fill_uniform(b.data(), b.size(), 3);
    Dev dx(x, DType::fp32), dw(w, DType::fp32), db(b, DType::fp32), y(sh.y_size(), DType::fp32);
    std::vector<double> ref(sh.y_size());
    for (bool with_bias : {true, false}) {
      cuda::conv2d_forward_implicit_gemm(sh, static_cast<const float*>(dx.p()), static_cast<const float*>(dw.p()),
                                         with_bias ? static_cast<const float*>(db.p()) : nullptr,
                                         static_cast<float*>(y.p()));
      DLB_CUDA_CHECK(cudaDeviceSynchronize());
      cpu::conv2d_forward_direct(sh, x.data(), w.data(), with_bias ? b.data() : nullptr, ref.data());
      const auto got = y.get();
      EXPECT_LE(max_rel_err(got.data(), ref.data(), ref.size()), default_tolerance(DType::fp32)) << with_bias;
      // The check is not vacuous: a perturbed output fails it.
      auto bad = got;
      bad[bad.size() / 3] += 0.1f;
      EXPECT_FALSE(judge(max_rel_err(bad.data(), ref.data(), ref.size()), default_tolerance(DType::fp32)).ok);
    }
  }
}

// Invalid shapes are rejected before anything reaches the device (no GPU needed to throw).
TEST(ConvGpuHost, ImplicitGemmRejectsInvalidShape) {
  EXPECT_THROW(cuda::conv2d_forward_implicit_gemm(Conv2dShape::make(1, 3, 2, 2, 4, 3, 3), nullptr, nullptr, nullptr, nullptr),
               UsageError);
  EXPECT_THROW(cuda::conv2d_forward_implicit_gemm(Conv2dShape::make(1, 3, 8, 8, 4, 3, 3, 0, 0), nullptr, nullptr, nullptr, nullptr),
               UsageError);
}

TEST(ConvGpu, CudnnRejectsInvalidShape) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(cuda::CudnnConv2d(Conv2dShape::make(1, 3, 2, 2, 4, 3, 3), DType::fp32), UsageError);
  EXPECT_THROW(cuda::CudnnConv2d(Conv2dShape::make(2, 3, 8, 8, 4, 3, 3), DType::fp64), Unsupported);
}

// Under CUDA graph capture a direction's first call (algorithm choice, workspace allocation) is
// refused before anything is allocated, also when the choice comes from the cache.
TEST(ConvGpu, CudnnFirstCallUnderCaptureAllocatesNothing) {
  SKIP_WITHOUT_GPU();
  const Conv2dShape sh = Conv2dShape::make(2, 3, 32, 32, 128, 5, 5);
  cuda::DeviceBuffer<float> x(sh.x_size()), w(sh.w_size()), y(sh.y_size());
  ASSERT_EQ(cudaMemset(x.data(), 0, x.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(w.data(), 0, w.bytes()), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    cuda::CudnnConv2d first(sh, DType::fp32);
    first.forward(x.data(), w.data(), nullptr, y.data(), s);  // searches, fills the choice cache
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cuda::CudnnConv2d second(sh, DType::fp32);  // same shape: its first call takes the cached choice
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const std::size_t before = cuda::current_device_bytes();
    EXPECT_THROW(second.forward(x.data(), w.data(), nullptr, y.data(), s), std::runtime_error);
    EXPECT_EQ(cuda::current_device_bytes(), before);
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    EXPECT_EQ(second.workspace(cuda::ConvDir::forward), nullptr);
    second.forward(x.data(), w.data(), nullptr, y.data(), s);  // outside capture it runs
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  cudaStreamDestroy(s);
}

// Each direction has its own workspace, which later directions' set-up never moves.
TEST(ConvGpu, CudnnDirectionsKeepTheirWorkspaces) {
  SKIP_WITHOUT_GPU();
  const Conv2dShape sh = Conv2dShape::make(4, 128, 14, 14, 16, 5, 5);  // lecture conv2
  cuda::DeviceBuffer<float> x(sh.x_size()), w(sh.w_size()), y(sh.y_size()), dw(sh.w_size()), db(sh.k);
  ASSERT_EQ(cudaMemset(x.data(), 0, x.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(w.data(), 0, w.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMemset(y.data(), 0, y.bytes()), cudaSuccess);
  cuda::CudnnConv2d c(sh, DType::fp32);
  c.forward(x.data(), w.data(), nullptr, y.data());
  const void* fwd = c.workspace(cuda::ConvDir::forward);
  c.backward_data(y.data(), w.data(), x.data());
  const void* bwd = c.workspace(cuda::ConvDir::backward_data);
  c.backward_filter(x.data(), y.data(), dw.data(), db.data());
  const void* flt = c.workspace(cuda::ConvDir::backward_filter);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(c.workspace(cuda::ConvDir::forward), fwd);
  EXPECT_EQ(c.workspace(cuda::ConvDir::backward_data), bwd);
  if (fwd && bwd) EXPECT_NE(fwd, bwd);
  if (fwd && flt) EXPECT_NE(fwd, flt);
  if (bwd && flt) EXPECT_NE(bwd, flt);
}
