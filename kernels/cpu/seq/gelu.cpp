// GELU, tanh approximation (see gelu.h): the fp64 reference, one body over the vector width, the dispatch.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/gelu.h"

#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {
namespace {
constexpr double kS2Pi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;
}  // namespace

void gelu_forward_ref(const double* x, double* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = 0.5 * x[i] * (1 + std::tanh(kS2Pi * (x[i] + kCubic * x[i] * x[i] * x[i])));
}

void gelu_backward_ref(const double* x, const double* dy, double* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double t = std::tanh(kS2Pi * (x[i] + kCubic * x[i] * x[i] * x[i]));
    dx[i] = dy[i] * (0.5 * (1 + t) + 0.5 * x[i] * (1 - t * t) * kS2Pi * (1 + 3 * kCubic * x[i] * x[i]));
  }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/gelu.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

void gelu_forward(const float* x, float* y, std::size_t n) {
  const auto body = DLB_ISA_PICK(gelu_range);
  parallel_rows(long(n), 1, [&](long lo, long hi) { body(x + lo, nullptr, y + lo, hi - lo); });
}

void gelu_backward(const float* x, const float* dy, float* dx, std::size_t n) {
  const auto body = DLB_ISA_PICK(gelu_range);
  parallel_rows(long(n), 1, [&](long lo, long hi) { body(x + lo, dy + lo, dx + lo, hi - lo); });
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// out = gelu(x) (dy null) or dy * gelu'(x), over n elements.
void gelu_range(const float* x, const float* dy, float* out, long n) {
  const vec s2pi = V::set1(0.7978845608f), c = V::set1(0.044715f), c3 = V::set1(3 * 0.044715f);
  const vec half = V::set1(0.5f), one = V::set1(1.f);
  for (long i = 0; i < n; i += V::L) {
    const int m = n - i < V::L ? int(n - i) : V::L;
    const vec xv = V::load_n(x + i, m, 0.f), x2 = V::mul(xv, xv);
    const vec t = vtanh(V::mul(s2pi, V::fma(V::mul(c, x2), xv, xv)));
    vec o;
    if (!dy) {
      o = V::mul(V::mul(half, xv), V::add(one, t));
    } else {
      const vec dt = V::mul(V::sub(one, V::mul(t, t)), V::mul(s2pi, V::fma(c3, x2, one)));
      o = V::mul(V::load_n(dy + i, m, 0.f), V::mul(half, V::fma(xv, dt, V::add(one, t))));
    }
    V::store_n(out + i, o, m);
  }
}

#endif
