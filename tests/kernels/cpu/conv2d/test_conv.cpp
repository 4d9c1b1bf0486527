// Conv2d on the CPU: every fast path (im2col + GEMM, the direct AVX2 kernels) against the fp64
// direct reference over shapes with padding, stride, odd sizes, c = 1, 1x1 filters, the channel
// and pixel blocks of the direct kernels and batches 1..3; the batch split over the kernel
// threads against the single-threaded path and the reference (odd batches, uneven tasks); the
// verification catches a deliberately wrong output; invalid shapes are rejected.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/threads.h"

using namespace dlb;

namespace {

struct Data {
  std::vector<float> x, w, b, dy;
  explicit Data(const Conv2dShape& sh) : x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size()) {
    fill_uniform(x.data(), x.size(), 1);
    fill_uniform(w.data(), w.size(), 2);
    fill_uniform(b.data(), b.size(), 3);
    fill_uniform(dy.data(), dy.size(), 4);
  }
};

const double kTol = default_tolerance(DType::fp32);

std::vector<Conv2dShape> shapes() {
  return {
      Conv2dShape::make(1, 1, 5, 5, 1, 3, 3),            // smallest useful
      Conv2dShape::make(2, 3, 7, 9, 4, 3, 3, 1, 1),      // padding, odd non-square
      Conv2dShape::make(3, 2, 11, 10, 5, 5, 5, 2, 2),    // pad + stride 2, batch 3
      Conv2dShape::make(2, 4, 8, 8, 6, 1, 1),            // pointwise (no im2col)
      Conv2dShape::make(2, 4, 9, 9, 3, 1, 1, 0, 2),      // 1x1 stride 2
      Conv2dShape::make(1, 3, 13, 13, 8, 7, 7, 3, 2),    // the ResNet stem in miniature
      Conv2dShape::make(3, 1, 6, 6, 2, 2, 3, 0, 1),      // non-square filter, c = 1
      Conv2dShape::make(2, 5, 7, 7, 3, 3, 3, 0, 3),      // stride > 1 without padding, odd leftovers
      Conv2dShape::make(2, 3, 4, 4, 2, 3, 3, 2, 1),      // padding larger than needed (output bigger than input)
      Conv2dShape::make(3, 3, 32, 32, 16, 5, 5),         // lecture conv1 layout, fewer channels
      // k <= c/4, stride 1: backward-data runs as a forward conv with rotated filters
      Conv2dShape::make(2, 24, 14, 14, 6, 5, 5),         // lecture conv2 layout, fewer channels
      Conv2dShape::make(2, 32, 9, 9, 4, 3, 3, 1),        // "same" padding
      Conv2dShape::make(1, 16, 7, 9, 3, 5, 5, 2),        // non-square, pad 2
      // k a multiple of 8 (<= 32), stride 1, no padding: the direct AVX2 kernels (forward and
      // backward-filter) where the CPU has AVX2 + FMA
      Conv2dShape::make(2, 32, 14, 14, 16, 5, 5),        // lecture conv2 layout
      Conv2dShape::make(3, 9, 11, 13, 24, 3, 7),         // 16 + 8 channel blocks, 7 taps = 5 + 2, 7 = 6 + 1 pixels
      Conv2dShape::make(1, 16, 8, 9, 8, 2, 2),           // 8 channels, 8 = 6 + 2 pixels
      Conv2dShape::make(2, 4, 10, 10, 32, 4, 4),         // two 16-channel blocks
      Conv2dShape::make(2, 8, 9, 11, 16, 3, 3, 1),       // direct forward on a zero-bordered copy (pad 1)
      Conv2dShape::make(1, 6, 7, 8, 8, 5, 5, 2),         // pad 2: border rows skipped, 8 = 6 + 2 pixels
      // K above 32, a multiple of 4 (AVX-512): forward and backward-filter as our own GEMMs on
      // im2col with the pixels in the lanes (4 channels x 6 vectors / 6 taps; 75 taps + db's row =
      // 12 x 6 + 4); rows of Q < 16 copied under a mask, of Q >= 16 with an overlapping last step;
      // PQ not a multiple of 16 (the last vector masked), PQ < 16, and stride + padding (forward only,
      // through the generic im2col).
      Conv2dShape::make(3, 3, 20, 19, 48, 5, 5),         // lecture conv1 layout, K = 48, Q = 15
      Conv2dShape::make(2, 2, 12, 40, 36, 3, 3),         // K = 36, C*R*S = 18, Q = 38, PQ = 380
      Conv2dShape::make(2, 3, 13, 11, 44, 3, 3, 1, 2),   // K = 44, pad 1, stride 2, PQ = 42
      Conv2dShape::make(1, 2, 5, 6, 36, 3, 3),           // PQ = 12: one masked vector
      // (the k <= c/4 shapes above also run their backward-data through the direct forward kernel,
      // with rotated filters and "full" padding, where the rotated conv has a multiple of 8 outputs)
      // k <= c/4, 3 or 5 taps wide: backward-data by dy columns, at avx512 (c a multiple of 16,
      // bwd_data_cols_avx512: 48 = 32 + 16 channels) and at avx2 (c a multiple of 8,
      // bwd_data_cols_avx2: 16-channel blocks, a last one of 8 for c = 24 above and 40 here; runs
      // of <= 7 pixels): rows of 20 = 7 + 7 + 6, 17 = 6 + 6 + 5 and 23 = 6 + 6 + 6 + 5 pixels
      // (transpose tiles of 16 or 8 + the rest), edge runs on both sides, R != S, and padding S - 1
      // (output smaller than dy: no border on the left)
      Conv2dShape::make(2, 48, 11, 20, 8, 5, 5, 1),
      Conv2dShape::make(1, 48, 6, 17, 8, 3, 3, 1),
      Conv2dShape::make(2, 32, 10, 12, 8, 3, 5, 1),
      Conv2dShape::make(1, 32, 6, 7, 8, 3, 3, 2),
      Conv2dShape::make(2, 40, 9, 23, 8, 3, 3, 1),
  };
}

}  // namespace

TEST(ConvShape, ValidAndStr) {
  const auto sh = Conv2dShape::make(64, 3, 32, 32, 128, 5, 5);
  EXPECT_TRUE(sh.valid());
  EXPECT_EQ(sh.p(), 28);
  EXPECT_EQ(sh.q(), 28);
  EXPECT_EQ(sh.str(), "n64_c3_h32_w32_k128_r5_s5_p0_u1");
  EXPECT_DOUBLE_EQ(sh.flops(), 2.0 * 64 * 128 * 28 * 28 * 3 * 25);
  EXPECT_EQ(Conv2dShape::make(16, 3, 224, 224, 64, 7, 7, 3, 2).p(), 112);
}

TEST(ConvShape, InvalidRejected) {
  EXPECT_FALSE(Conv2dShape::make(0, 3, 8, 8, 4, 3, 3).valid());
  EXPECT_FALSE(Conv2dShape::make(1, -1, 8, 8, 4, 3, 3).valid());
  EXPECT_FALSE(Conv2dShape::make(1, 3, 8, 8, 0, 3, 3).valid());
  EXPECT_FALSE(Conv2dShape::make(1, 3, 2, 2, 4, 3, 3).valid());      // filter larger than the input
  EXPECT_FALSE(Conv2dShape::make(1, 3, 8, 8, 4, 3, 3, -1).valid());  // negative padding
  EXPECT_FALSE(Conv2dShape::make(1, 3, 8, 8, 4, 3, 3, 0, 0).valid());  // stride 0
  EXPECT_TRUE(Conv2dShape::make(1, 3, 2, 2, 4, 3, 3, 1).valid());      // padding makes it fit

  const auto bad = Conv2dShape::make(1, 3, 2, 2, 4, 3, 3);
  std::vector<float> buf(64), ws;
  std::vector<double> ref(64);
  EXPECT_THROW(cpu::conv2d_forward_direct(bad, buf.data(), buf.data(), nullptr, ref.data()), UsageError);
  EXPECT_THROW(cpu::conv2d_forward_im2col(bad, buf.data(), buf.data(), nullptr, buf.data(), ws), UsageError);
  EXPECT_THROW(cpu::conv2d_backward_data_im2col(bad, buf.data(), buf.data(), buf.data(), ws), UsageError);
  EXPECT_THROW(cpu::conv2d_backward_filter_im2col(bad, buf.data(), buf.data(), buf.data(), nullptr, ws), UsageError);
}

// A tiny case checked by hand: 1x1x3x3 input of ones, 2x2 filter of ones, pad 0 -> every output is 4.
TEST(ConvDirect, HandChecked) {
  const auto sh = Conv2dShape::make(1, 1, 3, 3, 1, 2, 2);
  std::vector<float> x(9, 1.f), w(4, 1.f), b{0.5f};
  std::vector<double> y(sh.y_size());
  cpu::conv2d_forward_direct(sh, x.data(), w.data(), b.data(), y.data());
  ASSERT_EQ(y.size(), 4u);
  for (double v : y) EXPECT_DOUBLE_EQ(v, 4.5);
  // dx of all-ones dy: the number of windows covering each input pixel (corners 1, edges 2, centre 4).
  std::vector<float> dy(4, 1.f);
  std::vector<double> dx(9);
  cpu::conv2d_backward_data_direct(sh, dy.data(), w.data(), dx.data());
  EXPECT_DOUBLE_EQ(dx[0], 1.0);
  EXPECT_DOUBLE_EQ(dx[1], 2.0);
  EXPECT_DOUBLE_EQ(dx[4], 4.0);
  std::vector<double> dw(4), db(1);
  cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), dw.data(), db.data());
  for (double v : dw) EXPECT_DOUBLE_EQ(v, 4.0);
  EXPECT_DOUBLE_EQ(db[0], 4.0);
}

TEST(ConvIm2col, ForwardMatchesDirect) {
  for (const auto& sh : shapes()) {
    SCOPED_TRACE(sh.str());
    Data d(sh);
    std::vector<double> ref(sh.y_size());
    std::vector<float> y(sh.y_size(), 123.f), ws;
    for (bool with_bias : {false, true}) {
      const float* b = with_bias ? d.b.data() : nullptr;
      cpu::conv2d_forward_direct(sh, d.x.data(), d.w.data(), b, ref.data());
      cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), b, y.data(), ws);
      EXPECT_LE(max_rel_err(y.data(), ref.data(), y.size()), kTol) << "bias " << with_bias;
    }
  }
}

TEST(ConvIm2col, BackwardDataMatchesDirect) {
  for (const auto& sh : shapes()) {
    SCOPED_TRACE(sh.str());
    Data d(sh);
    std::vector<double> ref(sh.x_size());
    std::vector<float> dx(sh.x_size(), 123.f), ws;
    cpu::conv2d_backward_data_direct(sh, d.dy.data(), d.w.data(), ref.data());
    cpu::conv2d_backward_data_im2col(sh, d.dy.data(), d.w.data(), dx.data(), ws);
    EXPECT_LE(max_rel_err(dx.data(), ref.data(), dx.size()), kTol);
  }
}

TEST(ConvIm2col, BackwardFilterMatchesDirect) {
  for (const auto& sh : shapes()) {
    SCOPED_TRACE(sh.str());
    Data d(sh);
    std::vector<double> ref_w(sh.w_size()), ref_b(sh.k);
    std::vector<float> dw(sh.w_size(), 123.f), db(sh.k, 123.f), ws;
    cpu::conv2d_backward_filter_direct(sh, d.x.data(), d.dy.data(), ref_w.data(), ref_b.data());
    cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw.data(), db.data(), ws);
    EXPECT_LE(max_rel_err(dw.data(), ref_w.data(), dw.size()), kTol);
    EXPECT_LE(max_rel_err(db.data(), ref_b.data(), db.size()), kTol);
    // db may be null; dw must still be overwritten, not accumulated, on a second call.
    cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw.data(), nullptr, ws);
    EXPECT_LE(max_rel_err(dw.data(), ref_w.data(), dw.size()), kTol);
  }
}

// The workspace is reused across shapes of different sizes (as a model's layers do).
TEST(ConvIm2col, WorkspaceReusedAcrossShapes) {
  std::vector<float> ws;
  for (const auto& sh : {Conv2dShape::make(3, 8, 12, 12, 4, 3, 3, 1), Conv2dShape::make(1, 2, 5, 5, 3, 3, 3)}) {
    Data d(sh);
    std::vector<double> ref(sh.y_size());
    std::vector<float> y(sh.y_size());
    cpu::conv2d_forward_direct(sh, d.x.data(), d.w.data(), d.b.data(), ref.data());
    cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), d.b.data(), y.data(), ws);
    EXPECT_LE(max_rel_err(y.data(), ref.data(), y.size()), kTol);
  }
}

// The verification these tests rely on catches a wrong result: one perturbed output fails.
TEST(ConvIm2col, WrongOutputFailsVerification) {
  const auto sh = Conv2dShape::make(2, 3, 9, 9, 4, 3, 3, 1);
  Data d(sh);
  std::vector<double> ref(sh.y_size());
  std::vector<float> y(sh.y_size()), ws;
  cpu::conv2d_forward_direct(sh, d.x.data(), d.w.data(), nullptr, ref.data());
  cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), nullptr, y.data(), ws);
  ASSERT_TRUE(judge(max_rel_err(y.data(), ref.data(), y.size()), kTol).ok);
  y[y.size() / 2] += 0.05f;
  EXPECT_FALSE(judge(max_rel_err(y.data(), ref.data(), y.size()), kTol).ok);
  // A filter read transposed (r and s swapped) is also caught.
  std::vector<float> wt(d.w.size());
  for (int k = 0; k < sh.k; ++k)
    for (int c = 0; c < sh.c; ++c)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) wt[((k * sh.c + c) * 3 + s) * 3 + r] = d.w[((k * sh.c + c) * 3 + r) * 3 + s];
  cpu::conv2d_forward_im2col(sh, d.x.data(), wt.data(), nullptr, y.data(), ws);
  EXPECT_FALSE(judge(max_rel_err(y.data(), ref.data(), y.size()), kTol).ok);
}

// Big enough that the im2col buffer is capped and the batch is processed in several chunks
// (64*9 x 128*128 floats = 36 MiB per image): the chunk boundaries, and dw accumulated across chunks.
TEST(ConvIm2col, ChunkedBatchMatchesDirect) {
  const auto sh = Conv2dShape::make(3, 64, 128, 128, 2, 3, 3, 1);
  Data d(sh);
  std::vector<float> ws;
  std::vector<double> ref(sh.y_size());
  std::vector<float> y(sh.y_size());
  cpu::conv2d_forward_direct(sh, d.x.data(), d.w.data(), d.b.data(), ref.data());
  cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), d.b.data(), y.data(), ws);
  EXPECT_LE(max_rel_err(y.data(), ref.data(), y.size()), kTol);
  std::vector<double> ref_dx(sh.x_size());
  std::vector<float> dx(sh.x_size());
  cpu::conv2d_backward_data_direct(sh, d.dy.data(), d.w.data(), ref_dx.data());
  cpu::conv2d_backward_data_im2col(sh, d.dy.data(), d.w.data(), dx.data(), ws);
  EXPECT_LE(max_rel_err(dx.data(), ref_dx.data(), dx.size()), kTol);
  std::vector<double> ref_dw(sh.w_size()), ref_db(sh.k);
  std::vector<float> dw(sh.w_size()), db(sh.k);
  cpu::conv2d_backward_filter_direct(sh, d.x.data(), d.dy.data(), ref_dw.data(), ref_db.data());
  cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw.data(), db.data(), ws);
  EXPECT_LE(max_rel_err(dw.data(), ref_dw.data(), dw.size()), kTol);
  EXPECT_LE(max_rel_err(db.data(), ref_db.data(), db.size()), kTol);
}

// Shapes big enough (>= 2 MFLOP) for the batch split: odd batches, one image per task (9 tasks for
// forward, 8 uneven ones for backward-filter), the rotated-filter backward-data, and batch 1 (no
// split). The threaded result matches the single-threaded one (forward and backward-data compute
// every element the same way; backward-filter adds partial sums in another order) and the reference.
TEST(ConvIm2col, ThreadedMatchesSingleThreadAndDirect) {
  const std::vector<Conv2dShape> big = {
      Conv2dShape::make(5, 3, 32, 32, 16, 5, 5),         // lecture conv1 layout, odd batch
      Conv2dShape::make(9, 16, 24, 24, 8, 5, 5, 2),      // one image per task
      Conv2dShape::make(3, 24, 14, 14, 6, 5, 5),         // lecture conv2 layout: rotated-filter backward-data
      Conv2dShape::make(2, 16, 33, 31, 24, 3, 3, 1, 2),  // stride 2, odd sizes, batch 2
      Conv2dShape::make(1, 16, 30, 30, 16, 3, 3, 1),     // batch 1
      Conv2dShape::make(5, 64, 14, 14, 16, 5, 5),        // the direct kernels, one image per task
  };
  for (const auto& sh : big) {
    SCOPED_TRACE(sh.str());
    ASSERT_GE(sh.flops(), 2e6);
    Data d(sh);
    std::vector<float> ws, y(sh.y_size(), 7.f), y1(sh.y_size()), dx(sh.x_size(), 7.f), dx1(sh.x_size());
    std::vector<float> dw(sh.w_size(), 7.f), dw1(sh.w_size()), db(sh.k, 7.f), db1(sh.k);
    cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), d.b.data(), y.data(), ws);
    cpu::conv2d_backward_data_im2col(sh, d.dy.data(), d.w.data(), dx.data(), ws);
    cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw.data(), db.data(), ws);
    {
      cpu::KernelThreadsLimit one(1);
      std::vector<float> ws1;
      cpu::conv2d_forward_im2col(sh, d.x.data(), d.w.data(), d.b.data(), y1.data(), ws1);
      cpu::conv2d_backward_data_im2col(sh, d.dy.data(), d.w.data(), dx1.data(), ws1);
      cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw1.data(), db1.data(), ws1);
    }
    EXPECT_LE(max_rel_err(y.data(), y1.data(), y.size()), 1e-6);
    EXPECT_LE(max_rel_err(dx.data(), dx1.data(), dx.size()), 1e-6);
    EXPECT_LE(max_rel_err(dw.data(), dw1.data(), dw.size()), kTol);
    EXPECT_LE(max_rel_err(db.data(), db1.data(), db.size()), kTol);
    std::vector<double> ref_y(sh.y_size()), ref_dx(sh.x_size()), ref_dw(sh.w_size()), ref_db(sh.k);
    cpu::conv2d_forward_direct(sh, d.x.data(), d.w.data(), d.b.data(), ref_y.data());
    cpu::conv2d_backward_data_direct(sh, d.dy.data(), d.w.data(), ref_dx.data());
    cpu::conv2d_backward_filter_direct(sh, d.x.data(), d.dy.data(), ref_dw.data(), ref_db.data());
    EXPECT_LE(max_rel_err(y.data(), ref_y.data(), y.size()), kTol);
    EXPECT_LE(max_rel_err(dx.data(), ref_dx.data(), dx.size()), kTol);
    EXPECT_LE(max_rel_err(dw.data(), ref_dw.data(), dw.size()), kTol);
    EXPECT_LE(max_rel_err(db.data(), ref_db.data(), db.size()), kTol);
    // Same thread count, same bits: the partial sums are added in task order.
    std::vector<float> dw2(sh.w_size()), db2(sh.k);
    cpu::conv2d_backward_filter_im2col(sh, d.x.data(), d.dy.data(), dw2.data(), db2.data(), ws);
    EXPECT_EQ(dw2, dw);
    EXPECT_EQ(db2, db);
  }
}
