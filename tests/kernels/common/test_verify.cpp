// Verification primitives: a right answer passes, a deliberately wrong one fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"

using namespace dlb;

TEST(Verify, IdenticalIsZero) {
  std::vector<float> a(100);
  fill_uniform(a.data(), a.size(), 3);
  EXPECT_EQ(max_rel_err(a.data(), a.data(), a.size()), 0.0);
}

TEST(Verify, WrongResultFails) {
  std::vector<float> ref(256), got(256);
  fill_uniform(ref.data(), ref.size(), 1);
  got = ref;
  got[17] += 0.01f;  // one wrong element, 1% of the scale
  const auto r = judge(max_rel_err(got.data(), ref.data(), got.size()), default_tolerance(DType::fp32));
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.message.empty());
}

TEST(Verify, NaNFails) {
  std::vector<float> ref(8, 1.0f), got(8, 1.0f);
  got[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(judge(max_rel_err(got.data(), ref.data(), 8), 1e-5).ok);
}

TEST(Verify, RoundingErrorPasses) {
  std::vector<double> ref(64);
  std::vector<float> got(64);
  for (int i = 0; i < 64; ++i) ref[i] = std::sin(i * 0.1), got[i] = static_cast<float>(ref[i]);
  EXPECT_TRUE(judge(max_rel_err(got.data(), ref.data(), 64), default_tolerance(DType::fp32)).ok);
}

TEST(Verify, TolerancePerDtypeIsOrdered) {
  EXPECT_LT(default_tolerance(DType::fp32), default_tolerance(DType::tf32));
  EXPECT_LT(default_tolerance(DType::tf32), default_tolerance(DType::bf16));
  EXPECT_EQ(default_tolerance(DType::fp16), default_tolerance(DType::bf16));
}

TEST(Verify, DtypeNames) {
  for (auto t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16}) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_THROW(parse_dtype("fp8"), UsageError);
}

TEST(Verify, FillIsDeterministicAndBounded) {
  std::vector<float> a(1000), b(1000);
  fill_uniform(a.data(), a.size(), 42);
  fill_uniform(b.data(), b.size(), 42);
  EXPECT_EQ(a, b);
  for (float v : a) EXPECT_TRUE(v >= -1.0f && v < 1.0f);
}

// TF32 on Hopper truncates each input to 10 mantissa bits. Worst case: every input just above a
// power of two with all 13 dropped bits set (losing ~2^-10 of itself) and every term positive, so
// nothing cancels: the product's error approaches 2 * 2^-10, which the tolerance must cover (1e-3 would not).
TEST(Verify, Tf32ToleranceCoversTruncatedInputs) {
  auto truncate = [](float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    u &= ~((1u << 13) - 1);
    std::memcpy(&x, &u, 4);
    return x;
  };
  const float worst = 1.0f + (0x1p-10f - 0x1p-23f);  // 1.0000000000 1111111111111b: truncates to 1
  const int k = 257;
  double exact = 0, tf32 = 0;
  for (int i = 0; i < k; ++i) {
    const float a = std::ldexp(worst, i % 3), b = worst;  // powers of two keep the all-ones mantissa
    exact += double(a) * double(b);
    tf32 += double(truncate(a)) * double(truncate(b));
  }
  const float got = float(tf32);
  const double err = max_rel_err(&got, &exact, 1);
  EXPECT_GT(err, 1e-3);
  EXPECT_LE(err, default_tolerance(DType::tf32));
}

// A step's check takes the worst of the loss and every gradient: the tensor that gave it is named,
// and a NaN anywhere stays the answer (std::max(worst, NaN) would drop it and let the step pass).
TEST(WorstError, NamesTheWorstAndKeepsANan) {
  WorstError w;
  EXPECT_EQ(w.said(), "");
  w.loss(1.0, 1.0);
  EXPECT_EQ(w.err, 0.0);
  EXPECT_EQ(w.where, "the loss");
  w.add(2e-6, "wte");
  w.add(1e-6, "wpe");
  EXPECT_EQ(w.err, 2e-6);
  EXPECT_EQ(w.said(), " (worst: wte)");
  w.add(std::nan(""), "ln_f.weight");
  w.add(5.0, "lm_head");
  EXPECT_TRUE(std::isnan(w.err));
  EXPECT_EQ(w.where, "ln_f.weight");
  EXPECT_FALSE(judge(w.err, 1e-5).ok);
}
