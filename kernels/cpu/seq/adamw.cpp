// AdamW (see adamw.h): the fp64 reference, one body over the vector width (sqrt would not
// vectorize as a plain loop: errno), the parameters in ranges on the kernel threads. Elementwise,
// so the bits do not depend on the split.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/adamw.h"

#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void adamw_step_ref(double* p, const double* g, double* m, double* v, std::size_t n, const AdamW& o, long step) {
  const double bc1 = 1 - std::pow(double(o.beta1), step), bc2 = 1 - std::pow(double(o.beta2), step);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] *= 1 - double(o.lr) * o.weight_decay;
    m[i] = o.beta1 * m[i] + (1 - double(o.beta1)) * g[i];
    v[i] = o.beta2 * v[i] + (1 - double(o.beta2)) * g[i] * g[i];
    p[i] -= o.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
  }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/adamw.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const AdamW& o, long step) {
  const double bc1 = 1 - std::pow(double(o.beta1), step), bc2 = 1 - std::pow(double(o.beta2), step);
  // decay, step size, sqrt(bc2), 1 - b1, b2, 1 - b2, eps
  const float k[7] = {float(1 - double(o.lr) * o.weight_decay), float(o.lr / bc1), float(std::sqrt(bc2)),
                      1.f - o.beta1, o.beta2, 1.f - o.beta2, o.eps};
  const auto body = DLB_ISA_PICK(adamw_range);
  parallel_rows(long(n), 7, [&](long lo, long hi) { body(p + lo, g + lo, m + lo, v + lo, hi - lo, k); });
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

void adamw_range(float* p, const float* g, float* m, float* v, long n, const float* k) {
  const vec decay = V::set1(k[0]), step = V::set1(k[1]), bc2s = V::set1(k[2]), a1 = V::set1(k[3]);
  const vec b2 = V::set1(k[4]), a2 = V::set1(k[5]), eps = V::set1(k[6]);
  for (long i = 0; i < n; i += V::L) {
    const int c = n - i < V::L ? int(n - i) : V::L;
    const vec gi = V::load_n(g + i, c, 0.f), m0 = V::load_n(m + i, c, 0.f);
    const vec mi = V::fma(a1, V::sub(gi, m0), m0);
    const vec vi = V::fma(V::mul(a2, gi), gi, V::mul(b2, V::load_n(v + i, c, 0.f)));
    const vec den = V::add(V::div(V::sqrt(vi), bc2s), eps);
    V::store_n(m + i, mi, c);
    V::store_n(v + i, vi, c);
    V::store_n(p + i, V::sub(V::mul(V::load_n(p + i, c, 0.f), decay), V::div(V::mul(step, mi), den)), c);
  }
}

#endif
