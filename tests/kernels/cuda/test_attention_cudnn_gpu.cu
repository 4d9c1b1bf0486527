// kernels/cuda/seq/attention_cudnn: cuDNN's fused SDPA (through cudnn-frontend) forward and backward
// against the fp64 reference of kernels/cpu/seq, causal and full, head dims 64 and 128, T = 77 (not
// a multiple of any tile), bf16 and fp16 storage; and the refusals that need no device. The GPU cases
// skip without a device; they passed on an H100 (2026-11-27).
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/seq/attention.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/seq/attention_cudnn.h"
#include "tests/gpu_test.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace seqtest;
namespace cs = dlb::cpu::seq;
namespace gs = dlb::cuda::seq;

namespace {

// 16-bit storage both ways: bf16 by the project's reference rounding, fp16 by CUDA's host intrinsics.
std::uint16_t to16(float x, DType t) {
  return t == DType::bf16 ? cpu::fp32_to_bf16_ref(x) : __half_as_ushort(__float2half_rn(x));
}
float from16(std::uint16_t x, DType t) {
  return t == DType::bf16 ? cpu::bf16_to_fp32_ref(x) : __half2float(__ushort_as_half(x));
}

struct Tensor16 {  // host values as stored (rounded), their device copy
  std::vector<float> host;
  cuda::DeviceBuffer<std::uint16_t> dev;
  Tensor16(std::vector<float> x, DType t) : dev(x.size()) {
    std::vector<std::uint16_t> b(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) b[i] = to16(x[i], t), x[i] = from16(b[i], t);
    host = std::move(x);
    dev.upload(b.data(), b.size());
  }
  std::vector<float> get(DType t) const {
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> b(dev.size());
    dev.download(b.data(), b.size());
    std::vector<float> r(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) r[i] = from16(b[i], t);
    return r;
  }
};

}  // namespace

TEST(AttentionCudnnGpu, MatchesReferenceForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  if (const std::string why = gs::cudnn_attention_unavailable(); !why.empty()) GTEST_SKIP() << why;
  for (const gs::FlashKernel& f : gs::cudnn_attention_kernels())
    for (int D : {64, 128})
      for (bool causal : {false, true}) {
        cs::Attn a;
        a.B = 2, a.H = 3, a.Tq = 77, a.Tk = 77, a.D = D, a.causal = causal;
        const DType t = f.storage;
        const std::size_t n = std::size_t(a.B) * a.H * a.Tq * D;
        Tensor16 q(rand_f(n, 1), t), k(rand_f(n, 2), t), v(rand_f(n, 3), t), g(rand_f(n, 4), t);
        Tensor16 o(std::vector<float>(n), t), dq(std::vector<float>(n), t), dk(std::vector<float>(n), t),
            dv(std::vector<float>(n), t);
        cuda::DeviceBuffer<float> lse(std::size_t(a.B) * a.H * a.Tq);
        auto av = [&](const Tensor16& x) { return gs::AnyView{x.dev.data(), long(a.H) * a.Tq * D, long(a.Tq) * D, D}; };
        auto am = [&](Tensor16& x) { return gs::AnyMView{x.dev.data(), long(a.H) * a.Tq * D, long(a.Tq) * D, D}; };
        SCOPED_TRACE(std::string(dtype_name(t)) + " D" + std::to_string(D) + (causal ? " causal" : " full"));
        try {
          f.forward(a, av(q), av(k), av(v), am(o), lse.data(), t, nullptr);
          f.backward(a, av(q), av(k), av(v), av(o), av(g), lse.data(), am(dq), am(dk), am(dv), nullptr, t, nullptr);
        } catch (const Unsupported& e) {  // this device or cuDNN refuses the graph: say so, not pass
          ADD_FAILURE() << "cuDNN refused a shape the suite times: " << e.what();
          continue;
        }
        // Reference on the rounded inputs, in fp64.
        const auto Q = to_d(q.host), K = to_d(k.host), V = to_d(v.host), G = to_d(g.host);
        std::vector<double> ro(n), rdq(n), rdk(n), rdv(n);
        auto cv = [&](const std::vector<double>& x) { return cs::bhtd<const double>(x.data(), a.H, a.Tq, D); };
        auto mv = [&](std::vector<double>& x) { return cs::bhtd<double>(x.data(), a.H, a.Tq, D); };
        cs::attention_forward_ref(a, cv(Q), cv(K), cv(V), mv(ro));
        cs::attention_backward_ref(a, cv(Q), cv(K), cv(V), cv(G), mv(rdq), mv(rdk), mv(rdv));
        // 16-bit storage rounds O, and the tensor-core GEMMs P and dS, each by up to 2^-8 (bf16; fp16
        // 2^-11): 3 roundings on the path, so 3x the dtype's tolerance (1e-2), as flash_tc's test.
        const double tol = 3 * default_tolerance(t);
        EXPECT_LT(max_rel_err(o.get(t).data(), ro.data(), n), tol);
        EXPECT_LT(max_rel_err(dq.get(t).data(), rdq.data(), n), tol);
        EXPECT_LT(max_rel_err(dk.get(t).data(), rdk.data(), n), tol);
        EXPECT_LT(max_rel_err(dv.get(t).data(), rdv.data(), n), tol);
      }
}

// No device needed: fp32 storage and dropout are refused before any CUDA call, with one line.
TEST(AttentionCudnnGpu, RefusesFp32AndDropoutInOneLine) {
  cs::Attn a;
  a.B = 1, a.H = 1, a.Tq = 8, a.Tk = 8, a.D = 64;
  try {
    gs::attention_forward_cudnn(a, {}, {}, {}, {}, nullptr, DType::fp32, nullptr);
    ADD_FAILURE() << "fp32 accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("fp32"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  a.dropout = 0.1f;
  EXPECT_THROW(gs::attention_forward_cudnn(a, {}, {}, {}, {}, nullptr, DType::bf16, nullptr), Unsupported);
  EXPECT_EQ(gs::cudnn_attention_kernels().size(), 2u);
}
