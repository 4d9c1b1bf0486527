// GPU mixed-precision kernels (kernels/cuda/amp_kernels.h) against the host references: casts bit
// for bit, the fused unscale + inf/NaN check, and the device-side scale update against GradScaler.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cuda/amp_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"
#include "models/amp.h"
#include "models/half.h"

using namespace dlb;

namespace {
std::vector<float> test_values() {
  std::vector<float> x;
  for (std::uint64_t u = 0; u < (1ull << 32); u += 1000003) x.push_back(cpu::f32_from_bits(static_cast<std::uint32_t>(u)));
  for (float v : {0.0f, -0.0f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f, 65504.0f, 65520.0f, 0x1p-25f, 0x1p-24f, 1e-40f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 3e38f})
    x.push_back(v);
  return x;
}
}  // namespace

TEST(AmpGpu, CastsMatchTheHostReferences) {
  SKIP_WITHOUT_GPU();
  const auto x = test_values();
  const std::size_t n = x.size();
  cuda::DeviceBuffer<float> dx(n), dback(n);
  cuda::DeviceBuffer<std::uint16_t> dh(n);
  dx.upload(x.data(), n);
  std::vector<std::uint16_t> h(n);
  std::vector<float> back(n);
  for (DType t : {DType::fp16, DType::bf16}) {
    if (t == DType::fp16) cuda::amp_cast_fp32_to_fp16(dx.data(), dh.data(), n);
    else cuda::amp_cast_fp32_to_bf16(dx.data(), dh.data(), n);
    dh.download(h.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t ref = t == DType::fp16 ? models::to_fp16(x[i]) : models::to_bf16(x[i]);
      if (std::isnan(x[i])) {  // NaN payloads may differ; NaN-ness may not
        const float got = t == DType::fp16 ? models::from_fp16(h[i]) : models::from_bf16(h[i]);
        ASSERT_TRUE(std::isnan(got)) << dtype_name(t) << " " << std::hex << cpu::f32_bits(x[i]);
        continue;
      }
      ASSERT_EQ(h[i], ref) << dtype_name(t) << " " << std::hex << cpu::f32_bits(x[i]);
    }
    if (t == DType::fp16) cuda::amp_cast_fp16_to_fp32(dh.data(), dback.data(), n);
    else cuda::amp_cast_bf16_to_fp32(dh.data(), dback.data(), n);
    dback.download(back.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const float ref = t == DType::fp16 ? models::from_fp16(h[i]) : models::from_bf16(h[i]);
      if (std::isnan(ref)) ASSERT_TRUE(std::isnan(back[i]));
      else ASSERT_EQ(cpu::f32_bits(back[i]), cpu::f32_bits(ref));
    }
  }
}

TEST(AmpGpu, FusedUnscaleAndCheck) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 1 << 20;
  std::vector<float> g(n);
  fill_uniform(g.data(), n, 9);
  for (auto& v : g) v *= 65536.0f;
  cuda::DeviceBuffer<float> dg(n), flags(2);  // flags: inv_scale, found_inf
  dg.upload(g.data(), n);
  const float init[2] = {1.0f / 65536.0f, 0.0f};
  flags.upload(init, 2);
  cuda::amp_unscale_check(dg.data(), n, flags.data(), flags.data() + 1);
  std::vector<float> out(n);
  float f[2];
  dg.download(out.data(), n);
  flags.download(f, 2);
  EXPECT_EQ(f[1], 0.0f);
  for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], g[i] * (1.0f / 65536.0f));
  // one inf far into the buffer is found
  g[n - 3] = std::numeric_limits<float>::infinity();
  dg.upload(g.data(), n);
  cuda::amp_unscale_check(dg.data(), n, flags.data(), flags.data() + 1);
  flags.download(f, 2);
  EXPECT_EQ(f[1], 1.0f);
  // multi-tensor: a NaN in the second of three tensors
  cuda::DeviceBuffer<float> a(100), b(5000), c(7);
  std::vector<float> ha(100, 2.0f), hb(5000, 2.0f), hc(7, 2.0f);
  hb[4999] = std::numeric_limits<float>::quiet_NaN();
  a.upload(ha.data(), 100), b.upload(hb.data(), 5000), c.upload(hc.data(), 7);
  float* ptrs[3] = {a.data(), b.data(), c.data()};
  std::size_t sizes[3] = {100, 5000, 7};
  cuda::DeviceBuffer<float*> dptrs(3);
  cuda::DeviceBuffer<std::size_t> dsizes(3);
  dptrs.upload(ptrs, 3), dsizes.upload(sizes, 3);
  const float init2[2] = {0.5f, 0.0f};
  flags.upload(init2, 2);
  cuda::amp_unscale_check_multi(dptrs.data(), dsizes.data(), 3, flags.data(), flags.data() + 1);
  flags.download(f, 2);
  c.download(hc.data(), 7);
  EXPECT_EQ(f[1], 1.0f);
  EXPECT_EQ(hc[6], 1.0f);
}

TEST(AmpGpu, DeviceScaleUpdateFollowsGradScaler) {
  SKIP_WITHOUT_GPU();
  cuda::DeviceBuffer<float> st(3);  // scale, inv_scale, found_inf
  cuda::DeviceBuffer<int> tracker(1);
  const float init[3] = {65536.0f, 1.0f / 65536.0f, 0.0f};
  const int zero = 0;
  st.upload(init, 3), tracker.upload(&zero, 1);
  models::GradScalerConfig cfg;
  cfg.growth_interval = 5;
  models::GradScaler host(cfg);
  // finite x4, inf, finite x5 (growth), inf
  const bool pattern[] = {false, false, false, false, true, false, false, false, false, false, true};
  for (bool inf : pattern) {
    if (inf) {
      const float one = 1.0f;
      DLB_CUDA_CHECK(cudaMemcpy(st.data() + 2, &one, sizeof one, cudaMemcpyHostToDevice));
    }
    host.record_found_inf(inf);
    host.update();
    cuda::amp_update_scale(st.data(), st.data() + 1, tracker.data(), st.data() + 2, 2.0f, 0.5f, 5);
    float s[3];
    int t;
    st.download(s, 3), tracker.download(&t, 1);
    ASSERT_EQ(s[0], host.scale());
    ASSERT_EQ(s[1], 1.0f / host.scale());
    ASSERT_EQ(s[2], 0.0f);
    ASSERT_EQ(t, host.growth_tracker());
  }
}
