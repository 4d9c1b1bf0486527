// LayerNorm (see layernorm.h): the fp64 reference, one body over the vector width, the dispatch.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/layernorm.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {
namespace {
void moments_ref(const double* x, int C, double eps, double& mean, double& rstd) {
  double m = 0, v = 0;
  for (int j = 0; j < C; ++j) m += x[j];
  m /= C;
  for (int j = 0; j < C; ++j) v += (x[j] - m) * (x[j] - m);
  mean = m, rstd = 1.0 / std::sqrt(v / C + eps);
}
}  // namespace

void layernorm_forward_ref(const double* x, const double* w, const double* b, double* y, long rows, int C, double eps) {
  for (long r = 0; r < rows; ++r) {
    double m, s;
    moments_ref(x + r * C, C, eps, m, s);
    for (int j = 0; j < C; ++j) y[r * C + j] = (x[r * C + j] - m) * s * (w ? w[j] : 1.0) + (b ? b[j] : 0.0);
  }
}

void layernorm_backward_ref(const double* dy, const double* x, const double* w, double* dx, double* dw, double* db,
                            long rows, int C, double eps) {
  if (dw) std::fill(dw, dw + C, 0.0);
  if (db) std::fill(db, db + C, 0.0);
  for (long r = 0; r < rows; ++r) {
    double m, s, g = 0, gn = 0;
    moments_ref(x + r * C, C, eps, m, s);
    const double *xr = x + r * C, *dyr = dy + r * C;
    for (int j = 0; j < C; ++j) {
      const double n = (xr[j] - m) * s, d = dyr[j] * (w ? w[j] : 1.0);
      g += d, gn += d * n;
      if (dw) dw[j] += dyr[j] * n;
      if (db) db[j] += dyr[j];
    }
    g /= C, gn /= C;
    for (int j = 0; j < C; ++j) dx[r * C + j] = s * (dyr[j] * (w ? w[j] : 1.0) - g - (xr[j] - m) * s * gn);
  }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/layernorm.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, long rows,
                       int C, float eps) {
  const auto body = DLB_ISA_PICK(layernorm_row);
  parallel_rows(rows, 2L * C, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      float m, s;
      body(x + r * C, w, b, y + r * C, C, eps, m, s);
      if (mean) mean[r] = m;
      if (rstd) rstd[r] = s;
    }
  });
}

void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                        float* dx, float* dw, float* db, long rows, int C) {
  constexpr long kChunk = 32;  // rows a partial dw/db sums
  const long chunks = (rows + kChunk - 1) / kChunk;
  const bool params = dw || db;
  thread_local std::vector<float> partial;
  if (params) partial.assign(std::size_t(chunks) * 2 * C, 0.f);
  float* const part = partial.data();
  const auto body = DLB_ISA_PICK(layernorm_backward_row);
  parallel_chunks(rows, kChunk, [&](int c, long lo, long hi) {
    float* pw = params ? part + std::size_t(c) * 2 * C : nullptr;
    for (long r = lo; r < hi; ++r) body(dy + r * C, x + r * C, w, mean[r], rstd[r], dx + r * C, pw, C);
  });
  if (!params) return;
  const auto add = DLB_ISA_PICK(add_rows);
  parallel_rows(C, 2 * chunks, [&](long lo, long hi) {  // columns: each sums its chunks in order
    if (dw) add(part, chunks, 2L * C, lo, hi, dw);
    if (db) add(part + C, chunks, 2L * C, lo, hi, db);
  });
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// Mean, then the variance about it (two passes over a row in cache: no cancellation).
void layernorm_row(const float* x, const float* w, const float* b, float* y, int C, float eps, float& mean,
                   float& rstd) {
  const int tail = C % V::L, cv = C - tail;
  vec s = V::zero();
  for (int j = 0; j < cv; j += V::L) s = V::add(s, V::load(x + j));
  if (tail) s = V::add(s, V::load_n(x + cv, tail, 0.f));
  const float m = V::reduce_add(s) / C;
  const vec mv = V::set1(m);
  vec q = V::zero();
  for (int j = 0; j < cv; j += V::L) {
    const vec d = V::sub(V::load(x + j), mv);
    q = V::fma(d, d, q);
  }
  if (tail) {
    const vec d = V::sub(V::load_n(x + cv, tail, m), mv);
    q = V::fma(d, d, q);
  }
  const float r = 1.f / std::sqrt(V::reduce_add(q) / C + eps);
  const vec rv = V::set1(r);
  for (int j = 0; j < C; j += V::L) {
    const int n = C - j < V::L ? C - j : V::L;
    vec o = V::mul(V::sub(V::load_n(x + j, n, 0.f), mv), rv);
    if (w) o = V::mul(o, V::load_n(w + j, n, 0.f));
    if (b) o = V::add(o, V::load_n(b + j, n, 0.f));
    V::store_n(y + j, o, n);
  }
  mean = m, rstd = r;
}

// dx = rstd (g - mean(g) - n mean(g n)), g = dy w, n the normalised x; adds dy n and dy into
// pw[0, C) and pw[C, 2C) when pw is given.
void layernorm_backward_row(const float* dy, const float* x, const float* w, float mean, float rstd, float* dx,
                            float* pw, int C) {
  const vec mv = V::set1(mean), rv = V::set1(rstd);
  vec g = V::zero(), gn = V::zero();
  for (int j = 0; j < C; j += V::L) {
    const int n = C - j < V::L ? C - j : V::L;
    const vec d = V::load_n(dy + j, n, 0.f), nrm = V::mul(V::sub(V::load_n(x + j, n, mean), mv), rv);
    const vec gj = w ? V::mul(d, V::load_n(w + j, n, 0.f)) : d;
    g = V::add(g, gj);
    gn = V::fma(gj, nrm, gn);
    if (pw) {
      V::store_n(pw + j, V::fma(d, nrm, V::load_n(pw + j, n, 0.f)), n);
      V::store_n(pw + C + j, V::add(d, V::load_n(pw + C + j, n, 0.f)), n);
    }
  }
  const vec gm = V::set1(V::reduce_add(g) / C), gnm = V::set1(V::reduce_add(gn) / C);
  for (int j = 0; j < C; j += V::L) {
    const int n = C - j < V::L ? C - j : V::L;
    const vec d = V::load_n(dy + j, n, 0.f), nrm = V::mul(V::sub(V::load_n(x + j, n, mean), mv), rv);
    const vec gj = w ? V::mul(d, V::load_n(w + j, n, 0.f)) : d;
    V::store_n(dx + j, V::mul(rv, V::sub(V::sub(gj, gm), V::mul(nrm, gnm))), n);
  }
}

// out[j] = sum over k < parts of p[k * stride + j], j in [lo, hi), k in order.
void add_rows(const float* p, long parts, long stride, long lo, long hi, float* out) {
  for (long j = lo; j < hi; j += V::L) {
    const int n = hi - j < V::L ? int(hi - j) : V::L;
    vec s = V::zero();
    for (long k = 0; k < parts; ++k) s = V::add(s, V::load_n(p + k * stride + j, n, 0.f));
    V::store_n(out + j, s, n);
  }
}

#endif
