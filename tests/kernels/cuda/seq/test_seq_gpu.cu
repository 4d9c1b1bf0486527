// The sequence kernels on the GPU (kernels/cuda/seq/) against the CPU's fp64 references
// (kernels/cpu/seq/): GELU, Philox dropout (the CPU's mask, bit for bit), AdamW, embedding (and its
// deterministic backward), softmax, the fused classifier, LayerNorm, our RNN/LSTM layer and cuDNN's,
// attention unfused and the fused kernels of flash_kernels() (fp32, bf16, bf16 tensor cores). Skips without
// a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/seq/adamw.h"
#include "kernels/cpu/seq/attention.h"
#include "kernels/cpu/seq/dropout.h"
#include "kernels/cpu/seq/embedding.h"
#include "kernels/cpu/seq/gelu.h"
#include "kernels/cpu/seq/layernorm.h"
#include "kernels/cpu/seq/rnn.h"
#include "kernels/cpu/seq/softmax.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/nn_ops.h"
#include "kernels/cuda/seq/attention.h"
#include "kernels/cuda/seq/cudnn_rnn.h"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/embedding.h"
#include "kernels/cuda/seq/rnn.h"
#include "kernels/cuda/seq/rows.h"
#include "tests/gpu_test.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace seqtest;
namespace cs = dlb::cpu::seq;
namespace gs = dlb::cuda::seq;

namespace {
const double kTol = default_tolerance(DType::fp32);

template <class T>
struct Dev {
  cuda::DeviceBuffer<T> b;
  explicit Dev(std::size_t n) : b(n) {}
  explicit Dev(const std::vector<T>& h) : b(h.size()) { b.upload(h.data(), h.size()); }
  T* p() const { return b.data(); }
  std::vector<T> get() const {
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(b.size());
    b.download(h.data(), h.size());
    return h;
  }
};
std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = cpu::fp32_to_bf16_ref(v[i]);
  return r;
}
std::vector<float> from_bf16(const std::vector<std::uint16_t>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = cpu::bf16_to_fp32_ref(v[i]);
  return r;
}
}  // namespace

TEST(SeqGpu, GeluMatchesReference) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 4099;
  const auto x = rand_f(n, 1, 6.f), dy = rand_f(n, 2);
  std::vector<double> ry(n), rdx(n);
  cs::gelu_forward_ref(to_d(x).data(), ry.data(), n);
  cs::gelu_backward_ref(to_d(x).data(), to_d(dy).data(), rdx.data(), n);
  Dev<float> dx_(x), ddy(dy), y(n), dx(n);
  gs::gelu_forward(dx_.p(), y.p(), n, DType::fp32, nullptr);
  gs::gelu_backward(dx_.p(), ddy.p(), dx.p(), n, DType::fp32, nullptr);
  EXPECT_LT(max_rel_err(y.get().data(), ry.data(), n), kTol);
  EXPECT_LT(max_rel_err(dx.get().data(), rdx.data(), n), kTol);
  Dev<std::uint16_t> xb(to_bf16(x)), yb(n);
  gs::gelu_forward(xb.p(), yb.p(), n, DType::bf16, nullptr);
  std::vector<double> ryb(n);
  cs::gelu_forward_ref(to_d(from_bf16(to_bf16(x))).data(), ryb.data(), n);
  EXPECT_LT(max_rel_err(from_bf16(yb.get()).data(), ryb.data(), n), default_tolerance(DType::bf16));
}

TEST(SeqGpu, DropoutDrawsTheCpuMask) {
  SKIP_WITHOUT_GPU();
  const float p = 0.25f;
  for (std::uint64_t offset : {0ull, 3ull, 1000001ull})
    for (std::size_t n : {1ul, 7ul, 100003ul}) {
      const auto x = rand_f(n, 3);
      std::vector<std::uint8_t> ref(n);
      cs::dropout_mask_ref(ref.data(), n, p, 42, offset);
      Dev<float> dxin(x), y(n), back(n);
      Dev<std::uint8_t> mask(n);
      gs::dropout_forward(dxin.p(), y.p(), mask.p(), n, p, 42, offset, DType::fp32, nullptr);
      gs::dropout_backward(dxin.p(), back.p(), n, p, 42, offset, DType::fp32, nullptr);
      ASSERT_EQ(mask.get(), ref) << "offset " << offset << " n " << n;
      std::vector<float> cpu_y(n);
      cs::dropout_forward(x.data(), cpu_y.data(), nullptr, n, p, 42, offset);
      EXPECT_EQ(y.get(), cpu_y);
      EXPECT_EQ(back.get(), cpu_y);
      // The same mask at offset + add with add on the device (a graph's step offset, a multiple of 64).
      for (std::uint64_t add : {64ull, 7ull << 40}) {
        std::vector<std::uint8_t> ref_add(n);
        cs::dropout_mask_ref(ref_add.data(), n, p, 42, offset + add);
        Dev<std::uint64_t> dadd(std::vector<std::uint64_t>{add});
        Dev<std::uint8_t> mask_add(n);
        Dev<float> y_add(n), back_add(n);
        gs::dropout_forward(dxin.p(), y_add.p(), mask_add.p(), n, p, 42, offset, DType::fp32, nullptr, dadd.p());
        gs::dropout_backward(dxin.p(), back_add.p(), n, p, 42, offset, DType::fp32, nullptr, dadd.p());
        ASSERT_EQ(mask_add.get(), ref_add) << "offset " << offset << " + " << add << " n " << n;
        EXPECT_EQ(back_add.get(), y_add.get());
      }
    }
}

TEST(SeqGpu, AdamWMatchesReference) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 5000;
  const cs::AdamW o{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  const auto p0 = rand_f(n, 4);
  Dev<float> p(p0), m(std::vector<float>(n, 0.f)), v(std::vector<float>(n, 0.f));
  std::vector<double> pr = to_d(p0), mr(n, 0.0), vr(n, 0.0);
  for (long step = 1; step <= 3; ++step) {
    const auto g = rand_f(n, 10 + step);
    Dev<float> dg(g);
    gs::adamw_step(p.p(), dg.p(), m.p(), v.p(), n, o, step, nullptr);
    cs::adamw_step_ref(pr.data(), to_d(g).data(), mr.data(), vr.data(), n, o, step);
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  EXPECT_LT(max_rel_err(p.get().data(), pr.data(), n), kTol);
}

// The trainers' form: the step count on the device (advanced by cuda::increment) gives the host
// count's update; GradScaler's found_inf set, neither the count nor any weight, moment moves.
TEST(SeqGpu, AdamWWithTheDeviceStepCountAndTheSkipFlag) {
  SKIP_WITHOUT_GPU();
  const std::size_t n = 5000;
  const cs::AdamW o{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  const auto p0 = rand_f(n, 4);
  const std::vector<float> zero(n, 0.f);
  Dev<float> p(p0), m(zero), v(zero), ph(p0), mh(zero), vh(zero), skip(std::vector<float>{0.f});
  Dev<int> t(std::vector<int>{0});
  for (long step = 1; step <= 3; ++step) {
    Dev<float> dg(rand_f(n, 10 + step));
    cuda::increment(t.p(), nullptr, skip.p());
    gs::adamw_step(p.p(), dg.p(), m.p(), v.p(), n, o, t.p(), nullptr, skip.p());
    gs::adamw_step(ph.p(), dg.p(), mh.p(), vh.p(), n, o, step, nullptr);
  }
  EXPECT_EQ(t.get()[0], 3);
  EXPECT_LT(max_rel_err(p.get().data(), ph.get().data(), n), 1e-6);  // fp64 pow on the device and the host
  const auto pb = p.get(), mb = m.get(), vb = v.get();
  DLB_CUDA_CHECK(cudaMemcpy(skip.p(), std::vector<float>{1.f}.data(), sizeof(float), cudaMemcpyHostToDevice));
  Dev<float> dg(rand_f(n, 20));
  cuda::increment(t.p(), nullptr, skip.p());
  gs::adamw_step(p.p(), dg.p(), m.p(), v.p(), n, o, t.p(), nullptr, skip.p());
  EXPECT_EQ(t.get()[0], 3);
  EXPECT_EQ(p.get(), pb);
  EXPECT_EQ(m.get(), mb);
  EXPECT_EQ(v.get(), vb);
}

TEST(SeqGpu, EmbeddingMatchesReferenceAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  const int B = 4, T = 33, V = 50, C = 96;
  std::vector<std::int32_t> tok(B * T);
  for (int i = 0; i < B * T; ++i) tok[i] = (i * 7 + i / 5) % V;
  const auto w = rand_f(V * C, 5), pos = rand_f(T * C, 6), dy = rand_f(B * T * C, 7);
  std::vector<double> ry(B * T * C), rdw(V * C, 0.0), rdp(T * C, 0.0);
  cs::embedding_forward_ref(tok.data(), B, T, to_d(w).data(), V, C, to_d(pos).data(), ry.data());
  cs::embedding_backward_ref(tok.data(), B, T, to_d(dy).data(), V, C, rdw.data(), rdp.data());
  Dev<std::int32_t> dt(tok);
  Dev<float> dw_(w), dpos(pos), ddy(dy), y(B * T * C);
  Dev<char> scratch(gs::embedding_backward_scratch_bytes(B, T));
  gs::embedding_forward(dt.p(), B, T, dw_.p(), C, dpos.p(), y.p(), nullptr);
  EXPECT_LT(max_rel_err(y.get().data(), ry.data(), ry.size()), kTol);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Dev<float> dw(std::vector<float>(V * C, 0.f)), dp(std::vector<float>(T * C, 0.f));
    gs::embedding_backward(dt.p(), B, T, ddy.p(), C, dw.p(), dp.p(), scratch.p(), nullptr);
    const auto got = dw.get();
    EXPECT_LT(max_rel_err(got.data(), rdw.data(), rdw.size()), kTol);
    EXPECT_LT(max_rel_err(dp.get().data(), rdp.data(), rdp.size()), kTol);
    if (run == 0) first = got;
    else EXPECT_EQ(first, got);
  }
}

TEST(SeqGpu, SoftmaxClassifierLayerNormMatchReferences) {
  SKIP_WITHOUT_GPU();
  for (int causal : {0, 7}) {
    const long rows = 40;
    const int cols = 300;
    const auto x = rand_f(rows * cols, 8, 5.f), dy = rand_f(rows * cols, 9);
    std::vector<double> ry(x.size()), rdx(x.size());
    cs::softmax_forward_ref(to_d(x).data(), ry.data(), rows, cols, causal);
    cs::softmax_backward_ref(ry.data(), to_d(dy).data(), rdx.data(), rows, cols, causal);
    Dev<float> dx_(x), ddy(dy), y(x.size()), dx(x.size());
    gs::softmax_forward(dx_.p(), y.p(), rows, cols, causal, nullptr);
    gs::softmax_backward(y.p(), ddy.p(), dx.p(), rows, cols, causal, nullptr);
    EXPECT_LT(max_rel_err(y.get().data(), ry.data(), ry.size()), kTol) << "causal " << causal;
    EXPECT_LT(max_rel_err(dx.get().data(), rdx.data(), rdx.size()), 1e-4) << "causal " << causal;  // y rounded
  }
  {
    const long rows = 20;
    const int V = 5000, ld = 5008;
    const auto x = rand_f(rows * ld, 10, 4.f);
    std::vector<int> t(rows);
    for (long r = 0; r < rows; ++r) t[r] = r == 3 ? -100 : int(r * 97 % V);
    std::vector<double> rd(x.size()), rl(rows);
    const double rloss =
        cs::classifier_forward_backward_ref(to_d(x).data(), t.data(), rows, V, ld, rl.data(), rd.data());
    Dev<float> dl(x), losses(rows), loss(1);
    Dev<int> dt(t), scratch(1);
    gs::classifier_forward_backward(dl.p(), dt.p(), rows, V, ld, losses.p(), dl.p(), loss.p(), scratch.p(), nullptr);
    EXPECT_NEAR(loss.get()[0], rloss, kTol * rloss);
    EXPECT_LT(max_rel_err(losses.get().data(), rl.data(), rows), kTol);
    EXPECT_LT(max_rel_err(dl.get().data(), rd.data(), rd.size()), kTol);
    // GradScaler's seed gradient: dlogits times *scale (a power of two: exact), the loss unscaled
    Dev<float> scale(std::vector<float>{65536.f}), xs(x), ds(x.size());
    gs::classifier_forward_backward(xs.p(), dt.p(), rows, V, ld, losses.p(), ds.p(), loss.p(), scratch.p(),
                                    nullptr, scale.p());
    EXPECT_NEAR(loss.get()[0], rloss, kTol * rloss);
    const auto got = ds.get(), plain = dl.get();
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 65536.f * plain[i]) << i;
  }
  {
    const long rows = 70;
    const int C = 200;
    const auto x = rand_f(rows * C, 11, 3.f), w = rand_f(C, 12), b = rand_f(C, 13), dy = rand_f(rows * C, 14);
    std::vector<double> ry(x.size()), rdx(x.size()), rdw(C), rdb(C);
    cs::layernorm_forward_ref(to_d(x).data(), to_d(w).data(), to_d(b).data(), ry.data(), rows, C);
    cs::layernorm_backward_ref(to_d(dy).data(), to_d(x).data(), to_d(w).data(), rdx.data(), rdw.data(), rdb.data(),
                               rows, C);
    Dev<float> dx_(x), dw_(w), db_(b), ddy(dy), y(x.size()), mean(rows), rstd(rows), dx(x.size()), dw(C), db(C);
    Dev<char> scratch(gs::layernorm_backward_scratch_bytes(rows, C));
    gs::layernorm_forward(dx_.p(), dw_.p(), db_.p(), y.p(), mean.p(), rstd.p(), rows, C, cs::kLayerNormEps, nullptr);
    gs::layernorm_backward(ddy.p(), dx_.p(), dw_.p(), mean.p(), rstd.p(), dx.p(), dw.p(), db.p(), rows, C, scratch.p(),
                           nullptr);
    EXPECT_LT(max_rel_err(y.get().data(), ry.data(), ry.size()), kTol);
    EXPECT_LT(max_rel_err(dx.get().data(), rdx.data(), rdx.size()), kTol);
    EXPECT_LT(max_rel_err(dw.get().data(), rdw.data(), C), kTol);
    EXPECT_LT(max_rel_err(db.get().data(), rdb.data(), C), kTol);
  }
}

namespace {
// One recurrent layer on the GPU against the CPU's fp64 reference: ours with each step path, or
// cuDNN's. `full`: h0, c0, dL/dhn, dL/dcn given and dh0, dc0 asked for; else all of them null.
enum class RnnImpl { ours_cublas, ours_fused, cudnn };
void check_rnn_layer(const cs::RnnShape& s, RnnImpl impl, bool full = true) {
  const std::size_t GH = std::size_t(s.gates()) * s.H, BH = std::size_t(s.B) * s.H;
  const auto x = rand_f(s.rows() * s.I, 1), h0 = rand_f(BH, 2, 0.5f), c0 = rand_f(BH, 3, 0.5f);
  const auto wih = rand_f(GH * s.I, 4, 0.5f), whh = rand_f(GH * s.H, 5, 0.5f), bih = rand_f(GH, 6, 0.3f),
             bhh = rand_f(GH, 7, 0.3f), dy = rand_f(s.rows() * s.H, 8), dhn = rand_f(BH, 9), dcn = rand_f(BH, 10);
  std::vector<double> ry(s.rows() * s.H), rhn(BH), rcn(BH), rdx(s.rows() * s.I), rdh0(BH), rdc0(BH),
      rdwih(GH * s.I), rdwhh(GH * s.H), rdb(GH), rdb2(GH);
  const std::vector<double> zero(BH, 0.0);
  const auto X = to_d(x), H0 = full ? to_d(h0) : zero, C0 = full ? to_d(c0) : zero, WIH = to_d(wih), WHH = to_d(whh),
             BIH = to_d(bih), BHH = to_d(bhh), DHN = full ? to_d(dhn) : zero, DCN = full ? to_d(dcn) : zero;
  const cs::RnnWeightsRef wr{WIH.data(), WHH.data(), BIH.data(), BHH.data()};
  cs::rnn_forward_ref(s, wr, X.data(), H0.data(), C0.data(), ry.data(), rhn.data(), rcn.data());
  cs::rnn_backward_ref(s, wr, X.data(), H0.data(), C0.data(), to_d(dy).data(), DHN.data(), DCN.data(), rdx.data(),
                       rdh0.data(), rdc0.data(), {rdwih.data(), rdwhh.data(), rdb.data(), rdb2.data()});
  Dev<float> dx_(x), dh0_(h0), dc0_(c0), dwih_(wih), dwhh_(whh), dbih_(bih), dbhh_(bhh), ddy(dy), ddhn(dhn), ddcn(dcn);
  const cs::RnnWeights w{dwih_.p(), dwhh_.p(), dbih_.p(), dbhh_.p()};
  Dev<float> y(ry.size()), hn(BH), cn(BH), dx(rdx.size()), dh0(BH), dc0(BH), gwih(GH * s.I), gwhh(GH * s.H), gbih(GH),
      gbhh(GH);
  const cs::RnnGrads g{gwih.p(), gwhh.p(), gbih.p(), gbhh.p()};
  const auto in = [full](const Dev<float>& d) { return full ? d.p() : nullptr; };
  if (impl != RnnImpl::cudnn) {
    const auto step = impl == RnnImpl::ours_fused ? gs::RnnStep::fused : gs::RnnStep::cublas;
    ASSERT_EQ(gs::rnn_step_path(s, DType::fp32, step), step);
    Dev<float> saved(gs::rnn_saved_floats(s)), scratch(gs::rnn_scratch_floats(s));
    gs::rnn_forward(s, w, dx_.p(), in(dh0_), in(dc0_), y.p(), hn.p(), cn.p(), saved.p(), scratch.p(), nullptr,
                    DType::fp32, step);
    gs::rnn_backward(s, w, dx_.p(), ddy.p(), in(ddhn), in(ddcn), saved.p(), dx.p(), in(dh0), in(dc0), g, scratch.p(),
                     nullptr, DType::fp32, step);
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    gs::CudnnRnn rnn(s);
    rnn.set_weights(w, nullptr);
    rnn.forward(dx_.p(), in(dh0_), in(dc0_), y.p(), hn.p(), cn.p(), true, nullptr);
    rnn.backward(dx_.p(), in(dh0_), in(dc0_), y.p(), ddy.p(), in(ddhn), in(ddcn), dx.p(), in(dh0), in(dc0), g, nullptr);
  }
  SCOPED_TRACE(std::string(impl == RnnImpl::cudnn ? "cudnn " : impl == RnnImpl::ours_fused ? "ours fused " : "ours ") +
               (s.cell == cs::RnnCell::lstm ? "lstm" : "tanh") + (s.batch_first ? " batch_first" : "") +
               " T " + std::to_string(s.T) + " B " + std::to_string(s.B) + " H " + std::to_string(s.H) +
               (full ? "" : " no states"));
  // cuDNN's cell math and GEMM order are its own: PyTorch checks its cuDNN RNNs against its CPU ones
  // at 5e-5 (fp32, FMA math); a gate or layout mistake is off by O(0.1) either way.
  const double tol = impl == RnnImpl::cudnn ? 5e-5 : kTol;
  EXPECT_LT(max_rel_err(y.get().data(), ry.data(), ry.size()), tol);
  EXPECT_LT(max_rel_err(hn.get().data(), rhn.data(), BH), tol);
  EXPECT_LT(max_rel_err(dx.get().data(), rdx.data(), rdx.size()), tol);
  EXPECT_LT(max_rel_err(gwih.get().data(), rdwih.data(), rdwih.size()), tol);
  EXPECT_LT(max_rel_err(gwhh.get().data(), rdwhh.data(), rdwhh.size()), tol);
  EXPECT_LT(max_rel_err(gbih.get().data(), rdb.data(), GH), tol);
  EXPECT_LT(max_rel_err(gbhh.get().data(), rdb.data(), GH), tol);
  if (full) EXPECT_LT(max_rel_err(dh0.get().data(), rdh0.data(), BH), tol);
  if (s.cell == cs::RnnCell::lstm) {
    EXPECT_LT(max_rel_err(cn.get().data(), rcn.data(), BH), tol);
    if (full) EXPECT_LT(max_rel_err(dc0.get().data(), rdc0.data(), BH), tol);
  }
}
cs::RnnShape rnn_shape(cs::RnnCell cell, int T, int B, int I, int H, bool batch_first) {
  cs::RnnShape s;
  s.cell = cell, s.T = T, s.B = B, s.I = I, s.H = H, s.batch_first = batch_first;
  return s;
}
}  // namespace

// Our GPU layer (both step paths) and cuDNN's against the CPU reference, both cells and layouts.
TEST(SeqGpu, RnnLayersMatchReference) {
  SKIP_WITHOUT_GPU();
  for (cs::RnnCell cell : {cs::RnnCell::tanh, cs::RnnCell::lstm})
    for (bool bf : {false, true})
      for (RnnImpl impl : {RnnImpl::ours_cublas, RnnImpl::ours_fused, RnnImpl::cudnn})
        check_rnn_layer(rnn_shape(cell, 7, 3, 10, 24, bf), impl);
}

// The fused step at its edges: one step, batch 1 and its largest batch, hidden sizes that leave a
// block's units or a warp's lanes partly idle (37: neither 16, 4 nor 32 divides it; 130 > 128
// lanes' stride), and no initial states nor dh0 / dc0 asked for (its last launch skipped).
TEST(SeqGpu, RnnFusedStepMatchesReferenceAtItsEdges) {
  SKIP_WITHOUT_GPU();
  for (cs::RnnCell cell : {cs::RnnCell::tanh, cs::RnnCell::lstm})
    for (bool bf : {false, true}) {
      check_rnn_layer(rnn_shape(cell, 1, 1, 5, 37, bf), RnnImpl::ours_fused);
      check_rnn_layer(rnn_shape(cell, 6, gs::kFusedMaxBatch, 9, 37, bf), RnnImpl::ours_fused);
      check_rnn_layer(rnn_shape(cell, 4, 5, 8, 130, bf), RnnImpl::ours_fused, false);
    }
}

// Where each path runs (no GPU needed): fused only for fp32 GEMMs up to kFusedMaxBatch rows; automatic
// is cuBLAS unless DLB_RNN_STEP=fused (ctest sets none).
TEST(SeqGpu, RnnStepPathFusedOnlyWhereItApplies) {
  const auto s = [](int B) { return rnn_shape(cs::RnnCell::lstm, 4, B, 8, 32, false); };
  EXPECT_EQ(gs::rnn_step_path(s(1), DType::fp32, gs::RnnStep::fused), gs::RnnStep::fused);
  EXPECT_EQ(gs::rnn_step_path(s(gs::kFusedMaxBatch), DType::fp32, gs::RnnStep::fused), gs::RnnStep::fused);
  EXPECT_EQ(gs::rnn_step_path(s(gs::kFusedMaxBatch + 1), DType::fp32, gs::RnnStep::fused), gs::RnnStep::cublas);
  EXPECT_EQ(gs::rnn_step_path(s(8), DType::bf16, gs::RnnStep::fused), gs::RnnStep::cublas);
  EXPECT_EQ(gs::rnn_step_path(s(8), DType::fp32, gs::RnnStep::cublas), gs::RnnStep::cublas);
  if (!std::getenv("DLB_RNN_STEP")) EXPECT_EQ(gs::rnn_step_path(s(8), DType::fp32), gs::RnnStep::cublas);
}

// Attention inputs of `a` ([B, H, T, D] contiguous, seeded) and the fp64 reference's O, dQ, dK, dV on
// them (or on other inputs: the bf16-rounded ones).
struct AttnRef {
  std::vector<double> o, dq, dk, dv;
};
AttnRef attn_ref(const cs::Attn& a, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v, const std::vector<float>& g) {
  const std::size_t nq = std::size_t(a.B) * a.H * a.Tq * a.D, nk = std::size_t(a.B) * a.H * a.Tk * a.D;
  AttnRef r{std::vector<double>(nq), std::vector<double>(nq), std::vector<double>(nk), std::vector<double>(nk)};
  const auto Q = to_d(q), K = to_d(k), V = to_d(v), G = to_d(g);
  auto cv = [&](const std::vector<double>& x, int T) { return cs::bhtd<const double>(x.data(), a.H, T, a.D); };
  auto mv = [&](std::vector<double>& x, int T) { return cs::bhtd<double>(x.data(), a.H, T, a.D); };
  cs::attention_forward_ref(a, cv(Q, a.Tq), cv(K, a.Tk), cv(V, a.Tk), mv(r.o, a.Tq));
  cs::attention_backward_ref(a, cv(Q, a.Tq), cv(K, a.Tk), cv(V, a.Tk), cv(G, a.Tq), mv(r.dq, a.Tq), mv(r.dk, a.Tk),
                             mv(r.dv, a.Tk));
  return r;
}
struct AttnData {
  std::size_t nq, nk;
  std::vector<float> q, k, v, g;
  AttnRef ref;
  explicit AttnData(const cs::Attn& a)
      : nq(std::size_t(a.B) * a.H * a.Tq * a.D), nk(std::size_t(a.B) * a.H * a.Tk * a.D), q(rand_f(nq, 1)),
        k(rand_f(nk, 2)), v(rand_f(nk, 3)), g(rand_f(nq, 4)), ref(attn_ref(a, q, k, v, g)) {}
};

// The unfused core (fp32, dropout as `a` says) forward and backward against the reference.
void check_unfused(const cs::Attn& a, const AttnData& d) {
  Dev<float> q(d.q), k(d.k), v(d.v), g(d.g), o(d.nq), dq(d.nq), dk(d.nk), dv(d.nk);
  auto fc = [&](const Dev<float>& x, int T) { return cs::bhtd<const float>(x.p(), a.H, T, a.D); };
  auto fm = [&](Dev<float>& x, int T) { return cs::bhtd<float>(x.p(), a.H, T, a.D); };
  const std::size_t TT = std::size_t(a.B) * a.H * a.Tq * a.Tk;
  Dev<float> probs(2 * TT), scratch(TT);
  gs::attention_forward_unfused(a, fc(q, a.Tq), fc(k, a.Tk), fc(v, a.Tk), fm(o, a.Tq), probs.p(), nullptr);
  gs::attention_backward_unfused(a, fc(q, a.Tq), fc(k, a.Tk), fc(v, a.Tk), fc(g, a.Tq), probs.p(), fm(dq, a.Tq),
                                 fm(dk, a.Tk), fm(dv, a.Tk), scratch.p(), nullptr);
  EXPECT_LT(max_rel_err(o.get().data(), d.ref.o.data(), d.nq), kTol);
  EXPECT_LT(max_rel_err(dq.get().data(), d.ref.dq.data(), d.nq), kTol);
  EXPECT_LT(max_rel_err(dk.get().data(), d.ref.dk.data(), d.nk), kTol);
  EXPECT_LT(max_rel_err(dv.get().data(), d.ref.dv.data(), d.nk), kTol);
}

// The unfused core's causal query blocks (attention.cu: rows in blocks of 256 from Tq 512 on, each
// against the keys it sees; dV and dK summed over the blocks): Tq 600 in three blocks (the last one
// short), Tk equal, longer (keys no query sees: their dV, dK rows zero) and shorter, with and
// without dropout, against the fp64 reference. Not yet run on a GPU.
TEST(SeqGpu, UnfusedCausalBlocksMatchReference) {
  SKIP_WITHOUT_GPU();
  for (int Tk : {600, 700, 530})
    for (float drop : {0.f, 0.2f}) {
      cs::Attn a;
      a.B = 1, a.H = 2, a.Tq = 600, a.Tk = Tk, a.D = 20, a.causal = true;
      a.dropout = drop, a.seed = 5, a.offset = 3;
      SCOPED_TRACE("Tk " + std::to_string(Tk) + (drop > 0 ? " dropout" : ""));
      check_unfused(a, AttnData(a));
    }
}

// Unfused (fp32, with and without dropout) and every fused kernel of the table (flash fp32, bf16;
// flash_tc bf16 on the tensor cores) against the reference: tiles cut by T (70, 130 are not
// multiples of 64), Tq != Tk both ways; B < H and B > H (unfused batches over the larger).
TEST(SeqGpu, AttentionMatchesReference) {
  SKIP_WITHOUT_GPU();
  for (int D : {64, 128, 20})
    for (bool causal : {false, true})
      for (float drop : {0.f, 0.2f}) {
        cs::Attn a;
        a.B = causal ? 5 : 2, a.H = causal ? 2 : 3;
        a.Tq = 70, a.Tk = D == 20 ? 45 : D == 64 ? 130 : 70, a.D = D, a.causal = causal;
        a.dropout = drop;
        a.seed = 7, a.offset = 11;
        const AttnData d(a);
        const std::size_t nq = d.nq, nk = d.nk;
        const std::string name = "B" + std::to_string(a.B) + " H" + std::to_string(a.H) + " D" + std::to_string(D) +
                                 (causal ? " causal" : "") + (drop > 0 ? " dropout" : "");
        {
          SCOPED_TRACE("unfused " + name);
          check_unfused(a, d);
        }
        if (drop > 0) continue;  // the fused kernels have no dropout
        auto av = [&](const void* p, int T) {
          return gs::AnyView{p, long(a.H) * T * D, long(T) * D, D};
        };
        auto am = [&](void* p, int T) { return gs::AnyMView{p, long(a.H) * T * D, long(T) * D, D}; };
        Dev<float> dq_(d.q), dk_(d.k), dv_(d.v), dg(d.g), o(nq), dq(nq), dk(nk), dv(nk);
        Dev<float> lse(std::size_t(a.B) * a.H * a.Tq), scratch(std::size_t(a.B) * a.H * a.Tq);
        // bf16 storage: inputs rounded; the reference runs on the rounded inputs.
        const auto qb = to_bf16(d.q), kb = to_bf16(d.k), vb = to_bf16(d.v), gb = to_bf16(d.g);
        const AttnRef br = attn_ref(a, from_bf16(qb), from_bf16(kb), from_bf16(vb), from_bf16(gb));
        Dev<std::uint16_t> bq(qb), bk(kb), bv(vb), bg(gb), bo(nq), bdq(nq), bdk(nk), bdv(nk);
        for (const gs::FlashKernel& f : gs::flash_kernels()) {
          if (!f.takes(D)) continue;
          SCOPED_TRACE(std::string(f.name) + " " + dtype_name(f.storage) + " " + name);
          if (f.storage == DType::fp32) {
            f.forward(a, av(dq_.p(), a.Tq), av(dk_.p(), a.Tk), av(dv_.p(), a.Tk), am(o.p(), a.Tq), lse.p(), DType::fp32,
                      nullptr);
            f.backward(a, av(dq_.p(), a.Tq), av(dk_.p(), a.Tk), av(dv_.p(), a.Tk), av(o.p(), a.Tq), av(dg.p(), a.Tq),
                       lse.p(), am(dq.p(), a.Tq), am(dk.p(), a.Tk), am(dv.p(), a.Tk), scratch.p(), DType::fp32, nullptr);
            EXPECT_LT(max_rel_err(o.get().data(), d.ref.o.data(), nq), kTol);
            EXPECT_LT(max_rel_err(dq.get().data(), d.ref.dq.data(), nq), kTol);
            EXPECT_LT(max_rel_err(dk.get().data(), d.ref.dk.data(), nk), kTol);
            EXPECT_LT(max_rel_err(dv.get().data(), d.ref.dv.data(), nk), kTol);
            continue;
          }
          f.forward(a, av(bq.p(), a.Tq), av(bk.p(), a.Tk), av(bv.p(), a.Tk), am(bo.p(), a.Tq), lse.p(), DType::bf16,
                    nullptr);
          f.backward(a, av(bq.p(), a.Tq), av(bk.p(), a.Tk), av(bv.p(), a.Tk), av(bo.p(), a.Tq), av(bg.p(), a.Tq),
                     lse.p(), am(bdq.p(), a.Tq), am(bdk.p(), a.Tk), am(bdv.p(), a.Tk), scratch.p(), DType::bf16,
                     nullptr);
          // O rounded to bf16 feeds rowdot; the tensor-core rows also round P and dS to bf16 for their GEMMs.
          const double tb = (f.tensor_cores ? 3 : 2) * default_tolerance(DType::bf16);
          EXPECT_LT(max_rel_err(from_bf16(bo.get()).data(), br.o.data(), nq), tb);
          EXPECT_LT(max_rel_err(from_bf16(bdq.get()).data(), br.dq.data(), nq), tb);
          EXPECT_LT(max_rel_err(from_bf16(bdk.get()).data(), br.dk.data(), nk), tb);
          EXPECT_LT(max_rel_err(from_bf16(bdv.get()).data(), br.dv.data(), nk), tb);
        }
      }
}

// flash_tc_pipe is flash_tc's forward with the K/V copies pipelined (cp.async, two buffers) and K's
// fragments by ldmatrix: the same mma sequence per accumulator, so O and lse equal flash_tc's bit
// for bit. Shapes where buffers are reused several times (Tk 257: 5 key tiles of 64, the last one
// short) at both head dims, causal both ways, Tq != Tk both ways (a numpy model of the pipeline
// found no race at these shapes; this is the device's word). Not yet run on a GPU.
TEST(SeqGpu, FlashTcPipeIsFlashTcBitForBit) {
  SKIP_WITHOUT_GPU();
  const gs::FlashKernel* tc = nullptr;
  const gs::FlashKernel* pipe = nullptr;
  for (const gs::FlashKernel& f : gs::flash_kernels()) {
    if (std::string(f.name) == "flash_tc") tc = &f;
    if (std::string(f.name) == "flash_tc_pipe") pipe = &f;
  }
  ASSERT_TRUE(tc && pipe) << "flash_kernels() has no flash_tc / flash_tc_pipe row";
  for (int D : {64, 128})
    for (bool causal : {false, true})
      for (auto [Tq, Tk] : {std::pair{257, 257}, std::pair{190, 257}, std::pair{257, 190}}) {
        cs::Attn a;
        a.B = 1, a.H = 2, a.Tq = Tq, a.Tk = Tk, a.D = D, a.causal = causal;
        SCOPED_TRACE("D" + std::to_string(D) + " Tq" + std::to_string(Tq) + " Tk" + std::to_string(Tk) +
                     (causal ? " causal" : ""));
        const std::size_t nq = std::size_t(a.B) * a.H * Tq * D, nk = std::size_t(a.B) * a.H * Tk * D;
        Dev<std::uint16_t> q(to_bf16(rand_f(nq, 1))), k(to_bf16(rand_f(nk, 2))), v(to_bf16(rand_f(nk, 3)));
        Dev<std::uint16_t> o1(nq), o2(nq);
        Dev<float> lse1(std::size_t(a.B) * a.H * Tq), lse2(std::size_t(a.B) * a.H * Tq);
        auto av = [&](const Dev<std::uint16_t>& x, int T) {
          return gs::AnyView{x.p(), long(a.H) * T * D, long(T) * D, D};
        };
        auto am = [&](Dev<std::uint16_t>& x, int T) { return gs::AnyMView{x.p(), long(a.H) * T * D, long(T) * D, D}; };
        tc->forward(a, av(q, Tq), av(k, Tk), av(v, Tk), am(o1, Tq), lse1.p(), DType::bf16, nullptr);
        pipe->forward(a, av(q, Tq), av(k, Tk), av(v, Tk), am(o2, Tq), lse2.p(), DType::bf16, nullptr);
        auto differ = [](const auto& x, const auto& y) {  // how many elements differ (not the arrays printed)
          long n = 0;
          for (std::size_t i = 0; i < x.size(); ++i) n += x[i] != y[i];
          return n;
        };
        EXPECT_EQ(differ(o1.get(), o2.get()), 0);
        EXPECT_EQ(differ(lse1.get(), lse2.get()), 0);
      }
}
