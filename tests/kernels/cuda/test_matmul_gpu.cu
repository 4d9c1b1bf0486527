// GPU matmul kernels against the CPU fp64 reference (kernels/cpu/gemm_ref.h), on odd sizes that
// exercise every edge path. SKIPPED without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"
#include "kernels/cuda/gemm_sgemm.h"
#include "kernels/cuda/gemm_tc.h"

namespace {

using namespace dlb;

struct Inputs {
  int m, n, k;
  std::vector<float> a, b;
  Inputs(int m_, int n_, int k_) : m(m_), n(n_), k(k_), a(std::size_t(m_) * k_), b(std::size_t(k_) * n_) {
    fill_uniform(a.data(), a.size(), 21);
    fill_uniform(b.data(), b.size(), 22);
  }
};

// Runs `launch` into a NaN-filled C and checks C on the host against the fp64 reference.
template <class F>
CheckResult run_and_check(const Inputs& in, const std::vector<float>& a_ref, const std::vector<float>& b_ref,
                          DType t, F launch) {
  cuda::DeviceBuffer<float> dc(std::size_t(in.m) * in.n);
  EXPECT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
  launch(dc.data());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> c(dc.size());
  dc.download(c.data(), c.size());
  return cpu::check_gemm(a_ref.data(), b_ref.data(), c.data(), in.m, in.n, in.k, t);
}

using Shape = std::tuple<int, int, int>;
const auto kShapes = ::testing::Values(Shape{1, 1, 1}, Shape{17, 33, 9}, Shape{129, 127, 131}, Shape{256, 256, 256},
                                       Shape{100, 260, 36}, Shape{300, 70, 1001}, Shape{512, 1024, 27},
                                       Shape{1000, 1000, 1000});

// Test names <impl>_<m>x<n>x<k> (bf16/fp16 in between for GpuHalf), so a gtest filter can pick our
// kernels at small shapes (ci/device_run.sh's sanitizer step leaves out cublas and the largest).
std::string shape_name(const Shape& s) {
  return std::to_string(std::get<0>(s)) + "x" + std::to_string(std::get<1>(s)) + "x" + std::to_string(std::get<2>(s));
}

class GpuSgemm : public ::testing::TestWithParam<std::tuple<std::string, Shape>> {};

TEST_P(GpuSgemm, MatchesCpuReference) {
  SKIP_WITHOUT_GPU();
  const std::string impl = std::get<0>(GetParam());
  const int m = std::get<0>(std::get<1>(GetParam())), n = std::get<1>(std::get<1>(GetParam())),
            k = std::get<2>(std::get<1>(GetParam()));
  Inputs in(m, n, k);
  cuda::DeviceBuffer<float> da(in.a.size()), db(in.b.size());
  da.upload(in.a.data(), in.a.size());
  db.upload(in.b.data(), in.b.size());
  const auto r = run_and_check(in, in.a, in.b, DType::fp32, [&](float* c) {
    if (impl == "cublas") {
      cuda::cublas_gemm(cuda::CublasGemmMode::fp32, da.data(), db.data(), c, m, n, k);
    } else {
      const cuda::SgemmKernel* kernel = cuda::find_sgemm_kernel(impl);
      ASSERT_NE(kernel, nullptr) << impl;
      cuda::sgemm_forward(*kernel, da.data(), db.data(), c, m, n, k);
    }
  });
  EXPECT_TRUE(r.ok) << impl << " " << m << "x" << n << "x" << k << ": " << r.message;
}

// cuBLAS and every row of the kernel table (a new kernel is tested without an edit here).
std::vector<std::string> sgemm_impls_under_test() {
  std::vector<std::string> out{"cublas"};
  for (const cuda::SgemmKernel& kernel : cuda::sgemm_kernels()) out.push_back(kernel.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Impls, GpuSgemm, ::testing::Combine(::testing::ValuesIn(sgemm_impls_under_test()), kShapes),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + shape_name(std::get<1>(info.param));
                         });

TEST(GpuTf32, CublasWithinTf32Tolerance) {
  SKIP_WITHOUT_GPU();
  Inputs in(257, 129, 515);
  cuda::DeviceBuffer<float> da(in.a.size()), db(in.b.size());
  da.upload(in.a.data(), in.a.size());
  db.upload(in.b.data(), in.b.size());
  const auto r = run_and_check(in, in.a, in.b, DType::tf32, [&](float* c) {
    cuda::cublas_gemm(cuda::CublasGemmMode::tf32, da.data(), db.data(), c, in.m, in.n, in.k);
  });
  EXPECT_TRUE(r.ok) << r.message;
}

class GpuHalf : public ::testing::TestWithParam<std::tuple<std::string, std::string, Shape>> {};

TEST_P(GpuHalf, MatchesCpuReferenceOnRoundedInputs) {
  SKIP_WITHOUT_GPU();
  const std::string impl = std::get<0>(GetParam()), dtype = std::get<1>(GetParam());
  const int m = std::get<0>(std::get<2>(GetParam())), n = std::get<1>(std::get<2>(GetParam())),
            k = std::get<2>(std::get<2>(GetParam()));
  const bool bf = dtype == "bf16";
  Inputs in(m, n, k);
  std::vector<std::uint16_t> a16(in.a.size()), b16(in.b.size());
  std::vector<float> ar(in.a.size()), br(in.b.size());
  for (std::size_t i = 0; i < a16.size(); ++i) {
    a16[i] = bf ? cpu::float_to_bf16(in.a[i]) : cpu::float_to_fp16(in.a[i]);
    ar[i] = bf ? cpu::bf16_to_float(a16[i]) : cpu::fp16_to_float(a16[i]);
  }
  for (std::size_t i = 0; i < b16.size(); ++i) {
    b16[i] = bf ? cpu::float_to_bf16(in.b[i]) : cpu::float_to_fp16(in.b[i]);
    br[i] = bf ? cpu::bf16_to_float(b16[i]) : cpu::fp16_to_float(b16[i]);
  }
  cuda::DeviceBuffer<std::uint16_t> da(a16.size()), db(b16.size());
  da.upload(a16.data(), a16.size());
  db.upload(b16.data(), b16.size());
  const DType t = bf ? DType::bf16 : DType::fp16;
  const auto r = run_and_check(in, ar, br, t, [&](float* c) {
    if (impl == "cublas") {
      cuda::cublas_gemm(bf ? cuda::CublasGemmMode::bf16 : cuda::CublasGemmMode::fp16, da.data(), db.data(), c, m, n, k);
    } else {
      const cuda::HgemmKernel* kernel = cuda::find_hgemm_kernel(impl);
      ASSERT_NE(kernel, nullptr) << impl;
      kernel->launch(bf ? cuda::HalfType::bf16 : cuda::HalfType::fp16, da.data(), db.data(), c, m, n, k, nullptr);
    }
  });
  EXPECT_TRUE(r.ok) << impl << " " << dtype << " " << m << "x" << n << "x" << k << ": " << r.message;
  // Accumulation is fp32 on exactly-representable inputs: far better than the 1e-2 tolerance.
  EXPECT_LT(r.max_rel_err, 1e-4) << impl << " " << dtype;
}

// cuBLAS and every row of the tensor-core table.
std::vector<std::string> hgemm_impls_under_test() {
  std::vector<std::string> out{"cublas"};
  for (const cuda::HgemmKernel& kernel : cuda::hgemm_kernels()) out.push_back(kernel.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Impls, GpuHalf,
                         ::testing::Combine(::testing::ValuesIn(hgemm_impls_under_test()), ::testing::Values("bf16", "fp16"),
                                            kShapes),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" +
                                  shape_name(std::get<2>(info.param));
                         });

// gemm_f32 (the sequence and GPT-2 trainers' GEMMs on fp32 buffers), every transpose, strided
// operands (ld = cols + 3), C poisoned with NaN: fp32 is the fp64 product; bf16 and fp16 are the
// product of the operands rounded to the type (fp32 accumulation: ~1e-7 off it) and clearly not the
// product of the unrounded ones (the sign that the operands were rounded: on an H100 the FAST_16BF /
// FAST_16F compute types were not); an fp16 operand past 65504 turns into inf, a bf16 one does not.
TEST(GpuGemmF32, EachDtypeComputesWhatItNames) {
  SKIP_WITHOUT_GPU();
  const long m = 37, n = 29, k = 45;
  for (DType t : {DType::fp32, DType::bf16, DType::fp16})
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = tr & 1, tb = tr & 2;
      SCOPED_TRACE(std::string(dtype_name(t)) + (ta ? " A^T" : " A") + (tb ? " B^T" : " B"));
      const long ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n, lda = ac + 3, ldb = bc + 3;
      std::vector<float> a(std::size_t(ar * lda)), b(std::size_t(br * ldb));
      fill_uniform(a.data(), a.size(), 31 + tr);
      fill_uniform(b.data(), b.size(), 41 + tr);
      auto rounded = [&](float v) {
        if (t == DType::bf16) return cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(v));
        if (t == DType::fp16) return cpu::fp16_to_fp32_ref(cpu::fp32_to_fp16_ref(v));
        return v;
      };
      auto opa = [&](long i, long p) { return ta ? a[p * lda + i] : a[i * lda + p]; };
      auto opb = [&](long p, long j) { return tb ? b[j * ldb + p] : b[p * ldb + j]; };
      cuda::DeviceBuffer<float> da(a.size()), db(b.size()), dc(std::size_t(m * n));
      da.upload(a.data(), a.size());
      db.upload(b.data(), b.size());
      ASSERT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
      cuda::gemm_f32(nullptr, t, ta, tb, m, n, k, 1.f, da.data(), lda, db.data(), ldb, 0.f, dc.data(), n);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> c(dc.size());
      dc.download(c.data(), c.size());
      double d_rounded = 0, d_plain = 0, top = 0;
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j) {
          double r = 0, p = 0;
          for (long q = 0; q < k; ++q) {
            r += double(rounded(opa(i, q))) * double(rounded(opb(q, j)));
            p += double(opa(i, q)) * double(opb(q, j));
          }
          const double got = c[std::size_t(i * n + j)];
          ASSERT_TRUE(std::isfinite(got)) << i << "," << j;
          d_rounded = std::max(d_rounded, std::abs(got - r));
          d_plain = std::max(d_plain, std::abs(got - p));
          top = std::max(top, std::abs(p));
        }
      EXPECT_LT(d_rounded / top, 1e-5);
      if (t != DType::fp32) EXPECT_GT(d_plain / top, 10 * d_rounded / top) << "the operands were not rounded";
    }
  // One operand past fp16's range: inf (or NaN) in its row under fp16, finite under bf16.
  std::vector<float> a(4 * 4, 0.5f), b(4 * 4, 0.25f);
  a[0] = 1e6f;
  cuda::DeviceBuffer<float> da(a.size()), db(b.size()), dc(16);
  da.upload(a.data(), a.size());
  db.upload(b.data(), b.size());
  for (DType t : {DType::fp16, DType::bf16}) {
    cuda::gemm_f32(nullptr, t, false, false, 4, 4, 4, 1.f, da.data(), 4, db.data(), 4, 0.f, dc.data(), 4);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> c(16);
    dc.download(c.data(), c.size());
    EXPECT_EQ(std::isfinite(c[0]), t == DType::bf16) << dtype_name(t) << ": " << c[0];
    EXPECT_TRUE(std::isfinite(c[4])) << "row 1 holds no large operand";
  }
}

// Pointers into the middle of a buffer (one element in): the leading dimensions are multiples of 4
// and 8, but the rows are not 16-byte aligned, so the float4 / cp.async paths must not be taken.
TEST(GpuGemmOffsetPointers, MisalignedBasePointersFallBack) {
  SKIP_WITHOUT_GPU();
  const int m = 136, n = 264, k = 200;
  Inputs in(m, n, k);
  cuda::DeviceBuffer<float> da(in.a.size() + 1), db(in.b.size() + 1), dc(std::size_t(m) * n + 1);
  ASSERT_EQ(cudaMemcpy(da.data() + 1, in.a.data(), in.a.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.data() + 1, in.b.data(), in.b.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<float> c(std::size_t(m) * n);
  for (const cuda::SgemmKernel& kernel : cuda::sgemm_kernels()) {
    const char* impl = kernel.name;
    ASSERT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
    cuda::sgemm_forward(kernel, da.data() + 1, db.data() + 1, dc.data() + 1, m, n, k);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << impl;
    ASSERT_EQ(cudaMemcpy(c.data(), dc.data() + 1, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const auto r = cpu::check_gemm(in.a.data(), in.b.data(), c.data(), m, n, k, DType::fp32);
    EXPECT_TRUE(r.ok) << impl << ": " << r.message;
  }
  // Tensor-core kernel: A and B one half (2 bytes) in, C one float in (not 8-byte aligned for float2).
  std::vector<std::uint16_t> a16(in.a.size()), b16(in.b.size());
  std::vector<float> ar(in.a.size()), br(in.b.size());
  for (std::size_t i = 0; i < a16.size(); ++i) ar[i] = cpu::bf16_to_float(a16[i] = cpu::float_to_bf16(in.a[i]));
  for (std::size_t i = 0; i < b16.size(); ++i) br[i] = cpu::bf16_to_float(b16[i] = cpu::float_to_bf16(in.b[i]));
  cuda::DeviceBuffer<std::uint16_t> da16(a16.size() + 1), db16(b16.size() + 1);
  ASSERT_EQ(cudaMemcpy(da16.data() + 1, a16.data(), a16.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db16.data() + 1, b16.data(), b16.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
  for (const cuda::HgemmKernel& kernel : cuda::hgemm_kernels()) {
    ASSERT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
    kernel.launch(cuda::HalfType::bf16, da16.data() + 1, db16.data() + 1, dc.data() + 1, m, n, k, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(c.data(), dc.data() + 1, c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const auto r = cpu::check_gemm(ar.data(), br.data(), c.data(), m, n, k, DType::bf16);
    EXPECT_TRUE(r.ok) << kernel.name << ": " << r.message;
  }
}

// C with more than 2^31 elements (9.2 GB): every row and column offset past 2^31 must be 64-bit.
// Checked on the rows around element 2^31 and the last rows (fp64 reference of just those rows).
TEST(GpuGemmLarge, OutputBeyond2To31Elements) {
  SKIP_WITHOUT_GPU();
  const int m = 70000, n = 32776, k = 24;  // m*n = 2.29e9; n, k multiples of 8, m and n not of 128
  const std::size_t mn = std::size_t(m) * n;
  if (cuda::device_mem_info().free_bytes < mn * 4 + (std::size_t(1) << 30))
    GTEST_SKIP() << "needs ~10 GB of free device memory";
  Inputs in(m, n, k);
  std::vector<std::uint16_t> a16(in.a.size()), b16(in.b.size());
  std::vector<float> ar(in.a.size()), br(in.b.size());
  for (std::size_t i = 0; i < a16.size(); ++i) ar[i] = cpu::bf16_to_float(a16[i] = cpu::float_to_bf16(in.a[i]));
  for (std::size_t i = 0; i < b16.size(); ++i) br[i] = cpu::bf16_to_float(b16[i] = cpu::float_to_bf16(in.b[i]));
  cuda::DeviceBuffer<float> da(in.a.size()), db(in.b.size()), dc(mn);
  cuda::DeviceBuffer<std::uint16_t> da16(a16.size()), db16(b16.size());
  da.upload(in.a.data(), in.a.size());
  db.upload(in.b.data(), in.b.size());
  da16.upload(a16.data(), a16.size());
  db16.upload(b16.data(), b16.size());
  const int r_mid = int((std::size_t(1) << 31) / n) - 1, r_end = m - 3;  // 3 rows each
  std::vector<float> rows(std::size_t(3) * n);
  std::vector<std::string> impls;  // every table row but the uncoalesced naive kernel (minutes here)
  for (const cuda::HgemmKernel& kernel : cuda::hgemm_kernels()) impls.push_back(kernel.name);
  for (const cuda::SgemmKernel& kernel : cuda::sgemm_kernels())
    if (std::string(kernel.name) != "naive") impls.push_back(kernel.name);
  for (const std::string& impl : impls) {
    SCOPED_TRACE(impl);
    ASSERT_EQ(cudaMemset(dc.data(), 0xff, dc.bytes()), cudaSuccess);
    const cuda::HgemmKernel* tc = cuda::find_hgemm_kernel(impl);
    const bool mma = tc != nullptr;
    if (mma) {
      tc->launch(cuda::HalfType::bf16, da16.data(), db16.data(), dc.data(), m, n, k, nullptr);
    } else {
      cuda::sgemm_forward(*cuda::find_sgemm_kernel(impl), da.data(), db.data(), dc.data(), m, n, k);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int r0 : {r_mid, r_end}) {
      ASSERT_EQ(cudaMemcpy(rows.data(), dc.data() + std::size_t(r0) * n, rows.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      const auto& a = mma ? ar : in.a;
      const auto& b = mma ? br : in.b;
      const auto r = cpu::check_gemm(a.data() + std::size_t(r0) * k, b.data(), rows.data(), 3, n, k,
                                     mma ? DType::bf16 : DType::fp32);
      EXPECT_TRUE(r.ok) << "rows " << r0 << "..+3: " << r.message;
    }
  }
}

TEST(GpuSgemm, OutOfMemoryIsAnErrorNotACrash) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(cuda::DeviceBuffer<float>(std::size_t(1) << 45), OutOfMemory);  // 128 TiB
}

}  // namespace
