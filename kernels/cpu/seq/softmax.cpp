// Row softmax (see softmax.h): the fp64 reference, one body over the vector width, the dispatch.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void softmax_forward_ref(const double* x, double* y, long rows, int cols, int causal_tq) {
  for (long r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double* yr = y + r * cols;
    const int n = softmax_valid_cols(r, cols, causal_tq);
    const double m = *std::max_element(xr, xr + n);
    double s = 0;
    for (int j = 0; j < n; ++j) s += yr[j] = std::exp(xr[j] - m);
    for (int j = 0; j < cols; ++j) yr[j] = j < n ? yr[j] / s : 0.0;
  }
}

void softmax_backward_ref(const double* y, const double* dy, double* dx, long rows, int cols, int causal_tq) {
  for (long r = 0; r < rows; ++r) {
    const int n = softmax_valid_cols(r, cols, causal_tq);
    double dot = 0;
    for (int j = 0; j < n; ++j) dot += dy[r * cols + j] * y[r * cols + j];
    for (int j = 0; j < cols; ++j) dx[r * cols + j] = j < n ? y[r * cols + j] * (dy[r * cols + j] - dot) : 0.0;
  }
}

namespace {
long counted_rows(const int* targets, long rows, int V) {
  long count = 0;
  for (long r = 0; r < rows; ++r) {
    if (targets[r] >= V)
      throw std::invalid_argument("classifier: target " + std::to_string(targets[r]) + " in row " + std::to_string(r) +
                                  " is outside the " + std::to_string(V) + " classes");
    count += targets[r] >= 0;
  }
  return count;
}
}  // namespace

double classifier_forward_backward_ref(const double* logits, const int* targets, long rows, int V, int ld,
                                       double* losses, double* dlogits) {
  const long count = counted_rows(targets, rows, V);
  double total = 0;
  for (long r = 0; r < rows; ++r) {
    const double* x = logits + r * ld;
    const int t = targets[r];
    const double m = *std::max_element(x, x + V);
    double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp(x[j] - m);
    const double loss = t >= 0 ? std::log(s) + m - x[t] : 0.0;
    total += loss;
    if (losses) losses[r] = loss;
    if (dlogits)
      for (int j = 0; j < ld; ++j)
        dlogits[r * ld + j] = t < 0 || j >= V ? 0.0 : (std::exp(x[j] - m) / s - (j == t)) / count;
  }
  return count ? total / count : 0.0;
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/softmax.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

void softmax_forward(const float* x, float* y, long rows, int cols, int causal_tq) {
  const auto body = DLB_ISA_PICK(softmax_rows);
  parallel_rows(rows, 2L * cols, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) body(x + r * cols, y + r * cols, softmax_valid_cols(r, cols, causal_tq), cols);
  });
}

void softmax_backward(const float* y, const float* dy, float* dx, long rows, int cols, int causal_tq) {
  const auto body = DLB_ISA_PICK(softmax_backward_row);
  parallel_rows(rows, 3L * cols, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r)
      body(y + r * cols, dy + r * cols, dx + r * cols, softmax_valid_cols(r, cols, causal_tq), cols);
  });
}

float classifier_forward_backward(const float* logits, const int* targets, long rows, int V, int ld, float* losses,
                                  float* dlogits) {
  const long count = counted_rows(targets, rows, V);
  const float inv = count ? 1.f / float(count) : 0.f;
  thread_local std::vector<float> row_loss;
  row_loss.assign(rows, 0.f);
  float* const rl = row_loss.data();
  const auto body = DLB_ISA_PICK(classifier_row);
  parallel_rows(rows, 3L * V, [&](long lo, long hi) {
    for (long r = lo; r < hi; ++r) {
      float* d = dlogits ? dlogits + r * ld : nullptr;
      if (targets[r] < 0) {
        if (d) std::fill(d, d + ld, 0.f);
        continue;
      }
      rl[r] = body(logits + r * ld, targets[r], V, inv, d);
      if (d) std::fill(d + V, d + ld, 0.f);
    }
  });
  double total = 0;  // in row order: the same bits on any thread count
  for (long r = 0; r < rows; ++r) total += rl[r];
  if (losses) std::copy(rl, rl + rows, losses);
  return count ? float(total / count) : 0.f;
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// One row: the first n of `cols` columns normalised, the rest 0. Three passes (max, exp + sum,
// scale), the row in cache between them.
void softmax_rows(const float* x, float* y, int n, int cols) {
  const float inf = std::numeric_limits<float>::infinity();
  vec m = V::set1(-inf);
  int j = 0;
  for (; j + V::L <= n; j += V::L) m = V::max(m, V::load(x + j));
  if (j < n) m = V::max(m, V::load_n(x + j, n - j, -inf));
  const vec mx = V::set1(V::reduce_max(m));
  vec s = V::zero();
  for (j = 0; j + V::L <= n; j += V::L) {
    const vec e = vexp(V::sub(V::load(x + j), mx));
    V::store(y + j, e);
    s = V::add(s, e);
  }
  if (j < n) {
    const vec e = vexp(V::sub(V::load_n(x + j, n - j, -inf), mx));  // exp(-inf) = 0 in the tail
    V::store_n(y + j, e, n - j);
    s = V::add(s, e);
  }
  const vec inv = V::set1(1.f / V::reduce_add(s));
  for (j = 0; j + V::L <= n; j += V::L) V::store(y + j, V::mul(V::load(y + j), inv));
  if (j < n) V::store_n(y + j, V::mul(V::load_n(y + j, n - j, 0.f), inv), n - j);
  for (j = n; j < cols; ++j) y[j] = 0.f;
}

// The fused classifier's row: returns log(sum e^x) - x[t]; with d, d = (softmax - onehot(t)) * inv,
// the exponentials stored into d on the sum pass and scaled in place.
float classifier_row(const float* x, int t, int n, float inv, float* d) {
  const float inf = std::numeric_limits<float>::infinity(), xt = x[t];  // (before d, which may be x, changes)
  vec m = V::set1(-inf);
  int j = 0;
  for (; j + V::L <= n; j += V::L) m = V::max(m, V::load(x + j));
  if (j < n) m = V::max(m, V::load_n(x + j, n - j, -inf));
  const float mx = V::reduce_max(m);
  const vec mv = V::set1(mx);
  vec s = V::zero();
  for (j = 0; j < n; j += V::L) {
    const int k = n - j < V::L ? n - j : V::L;
    const vec e = vexp(V::sub(V::load_n(x + j, k, -inf), mv));
    if (d) V::store_n(d + j, e, k);
    s = V::add(s, e);
  }
  const float sum = V::reduce_add(s);
  if (d) {
    const vec sc = V::set1(inv / sum);
    for (j = 0; j < n; j += V::L) {
      const int k = n - j < V::L ? n - j : V::L;
      V::store_n(d + j, V::mul(V::load_n(d + j, k, 0.f), sc), k);
    }
    d[t] -= inv;
  }
  return std::log(sum) + mx - xt;
}

void softmax_backward_row(const float* y, const float* dy, float* dx, int n, int cols) {
  vec d = V::zero();
  int j = 0;
  for (; j + V::L <= n; j += V::L) d = V::fma(V::load(dy + j), V::load(y + j), d);
  if (j < n) d = V::fma(V::load_n(dy + j, n - j, 0.f), V::load_n(y + j, n - j, 0.f), d);
  const vec dot = V::set1(V::reduce_add(d));
  for (j = 0; j + V::L <= n; j += V::L) V::store(dx + j, V::mul(V::load(y + j), V::sub(V::load(dy + j), dot)));
  if (j < n)
    V::store_n(dx + j, V::mul(V::load_n(y + j, n - j, 0.f), V::sub(V::load_n(dy + j, n - j, 0.f), dot)), n - j);
  for (j = n; j < cols; ++j) dx[j] = 0.f;
}

#endif
