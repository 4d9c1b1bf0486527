// Half conversions (models/half.h, kernels/cpu/bf16_cast.h): the scalar references on known values
// (ties to even, inf/NaN, subnormals, max finite, overflow), the bulk fast paths bit-identical to
// the references, and the bf16 GEMM against its fp64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "models/half.h"

using namespace dlb;
using namespace dlb::models;

namespace {
float f(std::uint32_t bits) { return cpu::f32_from_bits(bits); }
const float inf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(HalfFp16, ExactValues) {
  EXPECT_EQ(to_fp16(0.0f), 0x0000);
  EXPECT_EQ(to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(to_fp16(0.5f), 0x3800);
  EXPECT_EQ(to_fp16(65504.0f), 0x7BFF);  // max finite
  EXPECT_EQ(from_fp16(0x7BFF), 65504.0f);
  EXPECT_EQ(to_fp16(0x1p-14f), 0x0400);  // min normal
  EXPECT_EQ(to_fp16(0x1p-24f), 0x0001);  // min subnormal
  EXPECT_EQ(from_fp16(0x0001), 0x1p-24f);
  EXPECT_EQ(from_fp16(0x03FF), 1023 * 0x1p-24f);  // max subnormal
  EXPECT_EQ(from_fp16(0x3555), 0.333251953125f);
}

TEST(HalfFp16, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0)
  EXPECT_EQ(to_fp16(1.0f + 0x1p-11f), 0x3C00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up
  EXPECT_EQ(to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);
  // just above the halfway point rounds up
  EXPECT_EQ(to_fp16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3C01);
  EXPECT_EQ(to_fp16(std::nextafter(1.0f + 0x1p-11f, 0.0f)), 0x3C00);
  // subnormal ties: 1.5 * 2^-24 -> 2 * 2^-24 (even); 2.5 * 2^-24 -> 2 * 2^-24
  EXPECT_EQ(to_fp16(1.5f * 0x1p-24f), 0x0002);
  EXPECT_EQ(to_fp16(2.5f * 0x1p-24f), 0x0002);
  // 2^-25 is halfway between 0 and the smallest subnormal: ties to 0; a bit more rounds up
  EXPECT_EQ(to_fp16(0x1p-25f), 0x0000);
  EXPECT_EQ(to_fp16(-0x1p-25f), 0x8000);
  EXPECT_EQ(to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  // the largest subnormal rounding up becomes the smallest normal
  EXPECT_EQ(to_fp16(1023.5f * 0x1p-24f), 0x0400);
}

TEST(HalfFp16, OverflowInfNaN) {
  EXPECT_EQ(to_fp16(65519.0f), 0x7BFF);  // below the halfway point 65520
  EXPECT_EQ(to_fp16(65520.0f), 0x7C00);  // tie -> even (2^16) = inf
  EXPECT_EQ(to_fp16(1e6f), 0x7C00);
  EXPECT_EQ(to_fp16(-1e6f), 0xFC00);
  EXPECT_EQ(to_fp16(inf), 0x7C00);
  EXPECT_EQ(to_fp16(-inf), 0xFC00);
  EXPECT_TRUE(std::isinf(from_fp16(0x7C00)));
  const std::uint16_t qn = to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qn & 0x7C00, 0x7C00);
  EXPECT_NE(qn & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(from_fp16(qn)));
  // a signalling NaN whose payload sits in the low bits must not turn into inf
  const std::uint16_t sn = to_fp16(f(0x7F800001));
  EXPECT_TRUE(std::isnan(from_fp16(sn)));
  EXPECT_TRUE(std::isnan(from_fp16(to_fp16(f(0xFF800001)))));
  EXPECT_EQ(to_fp16(1e-10f), 0x0000);  // underflow to zero keeps the sign
  EXPECT_EQ(to_fp16(-1e-10f), 0x8000);
}

TEST(HalfFp16, EveryHalfRoundTrips) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float v = from_fp16(static_cast<std::uint16_t>(h));
    if (std::isnan(v)) continue;
    ASSERT_EQ(to_fp16(v), h) << std::hex << h;
  }
}

TEST(HalfBf16, ExactRoundingInfNaNSubnormals) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(from_bf16(0x3F80), 1.0f);
  // ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  // max finite and overflow
  EXPECT_EQ(to_bf16(f(0x7F7F0000)), 0x7F7F);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds past max bf16 -> inf
  EXPECT_EQ(to_bf16(f(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(to_bf16(inf), 0x7F80);
  EXPECT_EQ(to_bf16(-inf), 0xFF80);
  EXPECT_DOUBLE_EQ(max_finite(DType::bf16), double(f(0x7F7F0000)));
  // NaN stays NaN, including payloads only in the dropped bits
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(f(0x7F800001)))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // subnormals are kept (no flush to zero) and rounded to nearest even
  EXPECT_EQ(to_bf16(f(0x00010000)), 0x0001);
  EXPECT_EQ(to_bf16(f(0x00018000)), 0x0002);  // tie 1.5 -> 2
  EXPECT_EQ(to_bf16(f(0x00008000)), 0x0000);  // tie 0.5 -> 0
  EXPECT_EQ(to_bf16(f(0x80008001)), 0x8001);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float v = from_bf16(static_cast<std::uint16_t>(h));
    if (std::isnan(v)) continue;
    ASSERT_EQ(to_bf16(v), h) << std::hex << h;
  }
}

// The vectorised casts give the references' bits on a sweep over fp32 bit patterns (every
// exponent, rounding boundaries, NaN/inf) plus odd lengths for the scalar tails.
TEST(HalfBulk, FastPathsMatchReferencesBitForBit) {
  std::vector<float> x;
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) x.push_back(f(static_cast<std::uint32_t>(u)));
  for (std::uint32_t base : {0x3F800000u, 0x477FE000u, 0x38800000u, 0x33000000u, 0x00000000u, 0x7F7F0000u})
    for (std::uint32_t d = 0; d < 0x4000; d += 3) x.push_back(f(base + d)), x.push_back(f((base + d) | 0x80000000u));
  x.push_back(inf), x.push_back(-inf), x.push_back(std::numeric_limits<float>::quiet_NaN());
  const std::size_t n = x.size();
  std::vector<std::uint16_t> hb(n), hh(n);
  cpu::cast_fp32_to_bf16(x.data(), hb.data(), n);
  cpu::cast_fp32_to_fp16(x.data(), hh.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(hb[i], to_bf16(x[i])) << std::hex << cpu::f32_bits(x[i]) << " path " << cpu::bf16_cast_path();
    ASSERT_EQ(hh[i], to_fp16(x[i])) << std::hex << cpu::f32_bits(x[i]) << " path " << cpu::fp16_cast_path();
  }
  std::vector<float> back(n), rt(x);
  cpu::cast_bf16_to_fp32(hb.data(), back.data(), n);
  cpu::round_through_bf16(rt.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(cpu::f32_bits(back[i]), cpu::f32_bits(from_bf16(hb[i])));
    ASSERT_EQ(cpu::f32_bits(rt[i]), cpu::f32_bits(back[i]));
  }
  cpu::cast_fp16_to_fp32(hh.data(), back.data(), n);
  rt = x;
  round_to(DType::fp16, rt.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const float r = from_fp16(hh[i]);
    if (std::isnan(r)) {
      ASSERT_TRUE(std::isnan(back[i]) && std::isnan(rt[i]));
      continue;
    }
    ASSERT_EQ(cpu::f32_bits(back[i]), cpu::f32_bits(r));
    ASSERT_EQ(cpu::f32_bits(rt[i]), cpu::f32_bits(r));
  }
  // the models' dispatch
  EXPECT_EQ(to_half(DType::bf16, std::vector<float>{1.0f, -2.0f}), (std::vector<std::uint16_t>{0x3F80, 0xC000}));
  EXPECT_THROW(to_half(DType::fp32, std::vector<float>{1.0f}), std::invalid_argument);
}

TEST(HalfTf32, RoundsMantissaTo10Bits) {
  float v[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-12f, inf};
  round_to(DType::tf32, v, 4);
  EXPECT_EQ(v[0], 1.0f);                 // tie -> even
  EXPECT_EQ(v[1], 1.0f + 0x1p-9f);       // tie -> even (up)
  EXPECT_EQ(v[2], 1.0f);
  EXPECT_TRUE(std::isinf(v[3]));
}

// bf16 GEMM: widen+sgemm (or sbgemm where available) against the fp64 reference, with transposes
// and beta; the error stays at fp32 accumulation level because the inputs are exact bf16 values.
TEST(Bf16Gemm, MatchesReference) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const long m = 37, n = 29, k = 71;
      std::vector<float> af(m * k), bf(k * n);
      fill_uniform(af.data(), af.size(), 3);
      fill_uniform(bf.data(), bf.size(), 4);
      const auto a = to_half(DType::bf16, af), b = to_half(DType::bf16, bf);
      std::vector<float> c(m * n, 1.0f), r(m * n, 1.0f);
      cpu::Bf16GemmArgs g;
      g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.a = a.data(), g.b = b.data(), g.beta = 0.5f;
      g.c = r.data();
      cpu::bf16_gemm_forward_ref(g);
      g.c = c.data();
      cpu::bf16_gemm(g);
      EXPECT_LT(max_rel_err(c.data(), r.data(), c.size()), 1e-5) << "ta=" << ta << " tb=" << tb;
      // beta = 0.5 was applied to the initial 1.0
      double sum = 0;
      for (long p = 0; p < k; ++p)
        sum += double(from_bf16(ta ? a[p * m + 0] : a[p])) * from_bf16(tb ? b[0 * k + p] : b[p * n + 0]);
      EXPECT_NEAR(r[0], sum + 0.5, 1e-5);
    }
  EXPECT_FALSE(cpu::bf16_gemm_path().empty());
}
