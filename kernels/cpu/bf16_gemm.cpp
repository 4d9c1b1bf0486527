// bf16 GEMM paths (see bf16_gemm.h).
#include "kernels/cpu/bf16_gemm.h"

#include <cblas.h>
#include <dlfcn.h>

#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"

namespace dlb::cpu {

namespace {

struct Lds {
  long lda, ldb, ldc;
};
Lds leading_dims(const Bf16GemmArgs& g) {
  return {g.lda ? g.lda : (g.trans_a ? g.m : g.k), g.ldb ? g.ldb : (g.trans_b ? g.k : g.n), g.ldc ? g.ldc : g.n};
}

// cblas_sbgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); bfloat16 = uint16.
using sbgemm_fn = void (*)(int, int, int, blasint, blasint, blasint, float, const std::uint16_t*, blasint,
                           const std::uint16_t*, blasint, float, float*, blasint);
sbgemm_fn sbgemm() {
  static const sbgemm_fn f = reinterpret_cast<sbgemm_fn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return f;
}

bool cpu_has_avx512_bf16() { return isa_allows(Isa::avx512_bf16); }  // under the DLB_CPU_ISA cap (isa.h)

// Rows x cols block of a row-major bf16 matrix with leading dimension ld, widened to dense fp32.
void widen(const std::uint16_t* src, long rows, long cols, long ld, std::vector<float>& dst) {
  dst.resize(static_cast<std::size_t>(rows) * cols);
  if (ld == cols) return cast_bf16_to_fp32(src, dst.data(), dst.size());
  for (long r = 0; r < rows; ++r) cast_bf16_to_fp32(src + r * ld, dst.data() + r * cols, cols);
}

}  // namespace

void bf16_gemm_forward_ref(const Bf16GemmArgs& g) {
  const Lds d = leading_dims(g);
  for (long i = 0; i < g.m; ++i)
    for (long j = 0; j < g.n; ++j) {
      double s = 0;
      for (long p = 0; p < g.k; ++p) {
        const std::uint16_t a = g.trans_a ? g.a[p * d.lda + i] : g.a[i * d.lda + p];
        const std::uint16_t b = g.trans_b ? g.b[j * d.ldb + p] : g.b[p * d.ldb + j];
        s += double(bf16_to_fp32_ref(a)) * double(bf16_to_fp32_ref(b));
      }
      float& c = g.c[i * d.ldc + j];
      c = static_cast<float>(s + (g.beta != 0.0f ? double(g.beta) * c : 0.0));
    }
}

void bf16_gemm_forward_sbgemm(const Bf16GemmArgs& g) {
  const sbgemm_fn f = sbgemm();
  if (!f) throw Unsupported("OpenBLAS has no cblas_sbgemm (built without BUILD_BFLOAT16)");
  const Lds d = leading_dims(g);
  f(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, blasint(g.m),
    blasint(g.n), blasint(g.k), 1.0f, g.a, blasint(d.lda), g.b, blasint(d.ldb), g.beta, g.c, blasint(d.ldc));
}

void bf16_gemm_forward_widen_sgemm(const Bf16GemmArgs& g) {
  // Scratch per thread, reused across calls (a training step calls this a few times per layer).
  thread_local std::vector<float> wa, wb;
  const Lds d = leading_dims(g);
  widen(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, d.lda, wa);
  widen(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, d.ldb, wb);
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              blasint(g.m), blasint(g.n), blasint(g.k), 1.0f, wa.data(), blasint(g.trans_a ? g.m : g.k), wb.data(),
              blasint(g.trans_b ? g.k : g.n), g.beta, g.c, blasint(d.ldc));
}

void bf16_gemm_forward_onednn(const Bf16GemmArgs& g) {
  onednn::Gemm o;
  o.dt = onednn::Dt::bf16;
  o.trans_a = g.trans_a, o.trans_b = g.trans_b;
  o.m = g.m, o.n = g.n, o.k = g.k;
  o.a = g.a, o.b = g.b, o.c = g.c;
  o.lda = g.lda, o.ldb = g.ldb, o.ldc = g.ldc;
  o.beta = g.beta;
  onednn::gemm(o);
}

namespace {
bool use_onednn() { return cpu_has_avx512_bf16() && onednn::available() && onednn::bf16_native(); }
bool use_sbgemm() { return cpu_has_avx512_bf16() && sbgemm() != nullptr; }
}  // namespace

bool bf16_gemm_native() { return use_onednn() || use_sbgemm(); }

namespace {
// src as bf16 in `scratch` (grown to n, never shrunk): a product's operand.
const std::uint16_t* as_bf16(const float* src, std::size_t n, std::vector<std::uint16_t>& scratch) {
  if (scratch.size() < n) scratch.resize(n);
  cast_fp32_to_bf16(src, scratch.data(), n);
  return scratch.data();
}
}  // namespace

void dense_bf16_forward(long m, long n, long k, const float* x, const float* w, float* y,
                        Bf16Scratch& s) {
  Bf16GemmArgs g;
  g.trans_b = true, g.m = m, g.n = n, g.k = k, g.c = y;
  g.a = as_bf16(x, std::size_t(m * k), s[0]), g.b = as_bf16(w, std::size_t(n * k), s[1]);
  bf16_gemm(g);
}

void dense_bf16_backward(long m, long n, long k, const float* x, const float* w, const float* dy, float* dw, float* dx,
                         Bf16Scratch& s, bool cast_by_forward) {
  // The forward's layout: x in s[0], w in s[1]; dy in s[2].
  const std::uint16_t* x16 = cast_by_forward ? s[0].data() : as_bf16(x, std::size_t(m * k), s[0]);
  Bf16GemmArgs g;
  g.trans_a = true, g.m = n, g.n = k, g.k = m, g.beta = 1.f, g.c = dw;
  g.a = as_bf16(dy, std::size_t(m * n), s[2]), g.b = x16;
  bf16_gemm(g);
  if (!dx) return;
  Bf16GemmArgs d;
  d.m = m, d.n = k, d.k = n, d.a = g.a, d.c = dx;
  d.b = cast_by_forward ? s[1].data() : as_bf16(w, std::size_t(n * k), s[1]);
  bf16_gemm(d);
}

void bf16_gemm(const Bf16GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (use_onednn()) return bf16_gemm_forward_onednn(g);
  if (use_sbgemm()) return bf16_gemm_forward_sbgemm(g);
  bf16_gemm_forward_widen_sgemm(g);
}

std::string bf16_gemm_path() {
  if (use_onednn()) return "onednn (avx512_bf16)";
  if (use_sbgemm()) return "openblas-sbgemm";
  std::string why;
  if (!cpu_has_avx512_bf16())
    why = isa_detected() == Isa::avx512_bf16
              ? "ISA level " + std::string(isa_name(isa_active())) + " (DLB_CPU_ISA) excludes avx512_bf16"
              : "CPU lacks avx512_bf16";
  else why = onednn::available() ? "oneDNN runs no native bf16 here" : onednn::unavailable_reason();
  return "widen+sgemm (" + why + ")";
}

}  // namespace dlb::cpu
