// The layers' fp32 GEMM and its one library choice (see sgemm.h).
#include "kernels/cpu/sgemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"

namespace dlb::cpu {

namespace {

struct Choice {
  SgemmLib lib = SgemmLib::openblas;
  std::string reason;
  bool forced = false;  // DLB_SGEMM named the library: every product takes it
};

Choice choose() {
  Choice c;
  const char* e = std::getenv("DLB_SGEMM");
  const std::string v = e ? e : "";
  if (v == "openblas" || v == "onednn") {
    c.lib = v == "onednn" ? SgemmLib::onednn : SgemmLib::openblas;
    if (!sgemm_lib_available(c.lib))
      throw UsageError("DLB_SGEMM=onednn: this build has no oneDNN (" + onednn::unavailable_reason() + ")");
    c.reason = "DLB_SGEMM=" + v;
    c.forced = true;
    return c;
  }
  if (!v.empty() && v != "auto") throw UsageError("DLB_SGEMM=" + v + ": expected auto, openblas or onednn");
  // The table: oneDNN where it may run its AVX-512 kernels (measured faster there), else OpenBLAS.
  if (!onednn::available()) {
    c.reason = "auto: no oneDNN in this build";
  } else if (static_cast<int>(isa_cap()) < static_cast<int>(Isa::avx512)) {
    c.reason = std::string("auto: ISA ") + isa_name(isa_cap()) + " (oneDNN is preferred at avx512 and up only)";
  } else {
    c.lib = SgemmLib::onednn;
    c.reason = "auto: oneDNN " + onednn::version() + " at " + isa_name(isa_cap()) + ", OpenBLAS under " +
               std::to_string(kSgemmSmallWork) + " multiply-adds";
  }
  return c;
}

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

}  // namespace

const char* sgemm_lib_name(SgemmLib lib) { return lib == SgemmLib::onednn ? "onednn" : "openblas"; }
bool sgemm_lib_available(SgemmLib lib) { return lib == SgemmLib::openblas || onednn::available(); }
SgemmLib sgemm_lib() { return choice().lib; }
std::string sgemm_lib_reason() { return choice().reason; }

// Napkin: 2^19 multiply-adds are ~9 us at one core's 117 GFLOP/s, where oneDNN's fixed 2-4 us a call
// (stream, memory objects) outweighs its faster kernel. Measured on the Zen 4, one thread, median of
// many calls: 1 x 128 x 128 0.6 us OpenBLAS vs 3.9 us oneDNN, 8 x 128 x 128 2.7 vs 5.6, 8 x 512 x 128
// (2^19) 22.7 vs 16.5, 64 x 2048 x 128 384 vs 322 (docs/notes/2026-11-26-sgemm.md).
SgemmLib sgemm_lib_for(long m, long n, long k) {
  const Choice& c = choice();
  if (c.lib == SgemmLib::onednn && !c.forced && m * n * k < kSgemmSmallWork) return SgemmLib::openblas;
  return c.lib;
}

void sgemm(const Sgemm& g) { sgemm_with(sgemm_lib_for(g.m, g.n, g.k), g); }

void sgemm_nt(long m, long n, long k, const float* a, const float* b, float* c, const float* bias) {
  Sgemm g;
  g.trans_b = true, g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c, g.bias = bias;
  sgemm(g);
}
void sgemm_nn(long m, long n, long k, const float* a, const float* b, float* c) {
  Sgemm g;
  g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.c = c;
  sgemm(g);
}
void sgemm_tn_add(long m, long n, long k, const float* a, const float* b, float* c) {
  Sgemm g;
  g.trans_a = true, g.m = m, g.n = n, g.k = k, g.a = a, g.b = b, g.beta = 1.f, g.c = c;
  sgemm(g);
}

void sgemm_with(SgemmLib lib, const Sgemm& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.bias && g.beta != 0.f) throw std::invalid_argument("sgemm: a bias needs beta 0");
  const long lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k), ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n),
             ldc = g.ldc ? g.ldc : g.n;
  if (g.k <= 0 || lib == SgemmLib::openblas) {  // (k = 0: C = beta C, which oneDNN's matmul does not take)
    float beta = g.beta;
    if (g.bias) {  // C = bias rows, then accumulated onto (OpenBLAS skips its beta pass at beta 1)
      for (long i = 0; i < g.m; ++i) std::copy_n(g.bias, g.n, g.c + i * ldc);
      beta = 1.f;
    }
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, int(g.m),
                int(g.n), int(g.k), 1.f, g.a, int(lda), g.b, int(ldb), beta, g.c, int(ldc));
    return;
  }
  onednn::Gemm o;
  o.dt = onednn::Dt::f32;
  o.trans_a = g.trans_a, o.trans_b = g.trans_b;
  o.m = g.m, o.n = g.n, o.k = g.k;
  o.a = g.a, o.b = g.b, o.c = g.c;
  o.lda = lda, o.ldb = ldb, o.ldc = ldc;
  o.beta = g.beta;
  o.bias = g.bias;
  onednn::gemm(o);
}

}  // namespace dlb::cpu
