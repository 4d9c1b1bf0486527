// Training kernels on the CPU (see nn_ops.h). Plain loops the compiler vectorizes; the memory they
// touch per step is a few MB for the lecture model, against ~60 MFLOP per image in the convolutions.
#include "kernels/cpu/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/threads.h"

namespace dlb::cpu {
namespace {
// Large arrays are cut into tasks of at least this many floats touched for the kernel threads:
// below that a region's few microseconds cost more than they save.
constexpr long kMinTaskFloats = 1 << 14;
constexpr int kTasksPerThread = 4;  // a few per thread, so a thread slowed by a busy core gets fewer

// fn(lo, hi) over [0, n), items of `per_item` floats, in tasks on the kernel threads.
template <class F>
void split_items(long n, long per_item, F&& fn) {
  const long by_size = n * per_item / kMinTaskFloats;
  const int tasks = int(std::max(1L, std::min<long>({n, by_size, long(kTasksPerThread) * kernel_threads()})));
  if (tasks == 1) return fn(0L, n);
  parallel_tasks(tasks, [&](int t) {
    long lo, hi;
    split_range(n, tasks, t, lo, hi);
    fn(lo, hi);
  });
}
}  // namespace

void relu_forward(const float* x, float* y, std::size_t n) {
  split_items(long(n), 1, [&](long lo, long hi) {
    for (long i = lo; i < hi; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
  });
}
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) {
  split_items(long(n), 1, [&](long lo, long hi) {
    for (long i = lo; i < hi; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
  });
}
void sigmoid_forward(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
}
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}

void bias_rows_forward(float* y, const float* b, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) y[std::size_t(i) * cols + j] += b[j];
}
void bias_rows_backward(const float* dy, float* db, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) db[j] += dy[std::size_t(i) * cols + j];
}
void bias_nchw_forward(float* y, const float* b, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      float* p = y + (std::size_t(i) * c + j) * hw;
      for (int t = 0; t < hw; ++t) p[t] += b[j];
    }
}
void bias_nchw_backward(const float* dy, float* db, int n, int c, int hw) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      const float* p = dy + (std::size_t(i) * c + j) * hw;
      double s = 0;
      for (int t = 0; t < hw; ++t) s += p[t];
      db[j] += static_cast<float>(s);
    }
}

namespace {
// maxpool2d_forward over planes [plane0, plane1).
void maxpool2d_forward_planes(const float* x, float* y, std::int32_t* arg, long plane0, long plane1, int h, int w,
                              int k) {
  const int p = h / k, q = w / k;
  if (k == 2) {
    // The lecture's 2x2 pool, branch-free (the generic loop's data-dependent branches mispredict on
    // every other window). Same visiting order and tie/NaN rule: a later element wins when it is
    // strictly greater or NaN.
    for (long plane = plane0; plane < plane1; ++plane) {
      const float* xp = x + plane * h * w;
      float* yp = y + plane * p * q;
      std::int32_t* ap = arg + plane * p * q;
      const std::int32_t base = static_cast<std::int32_t>(plane * h * w);
      for (int i = 0; i < p; ++i) {
        const float* r0 = xp + (2 * i) * w;
        const float* r1 = r0 + w;
        const std::int32_t o0 = base + 2 * i * w, o1 = o0 + w;
        for (int j = 0; j < q; ++j) {
          float bv = r0[2 * j];
          std::int32_t bi = o0 + 2 * j;
          float v = r0[2 * j + 1];
          bool t = v > bv || v != v;
          bv = t ? v : bv, bi = t ? o0 + 2 * j + 1 : bi;
          v = r1[2 * j];
          t = v > bv || v != v;
          bv = t ? v : bv, bi = t ? o1 + 2 * j : bi;
          v = r1[2 * j + 1];
          t = v > bv || v != v;
          bv = t ? v : bv, bi = t ? o1 + 2 * j + 1 : bi;
          yp[i * q + j] = bv;
          ap[i * q + j] = bi;
        }
      }
    }
    return;
  }
  for (long plane = plane0; plane < plane1; ++plane) {
    const float* xp = x + plane * h * w;
    float* yp = y + plane * p * q;
    std::int32_t* ap = arg + plane * p * q;
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < q; ++j) {
        int best = (i * k) * w + j * k;
        float bv = xp[best];
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const int idx = (i * k + a) * w + j * k + b;
            if (xp[idx] > bv || std::isnan(xp[idx])) bv = xp[idx], best = idx;
          }
        yp[i * q + j] = bv;
        ap[i * q + j] = static_cast<std::int32_t>(plane * h * w + best);
      }
  }
}
}  // namespace

void maxpool2d_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k) {
  split_items(long(n) * c, long(h) * w,
              [&](long lo, long hi) { maxpool2d_forward_planes(x, y, arg, lo, hi, h, w, k); });
}
void maxpool2d_backward(const float* dy, const std::int32_t* arg, float* dx, std::size_t x_size, std::size_t y_size) {
  std::fill(dx, dx + x_size, 0.f);
  for (std::size_t i = 0; i < y_size; ++i) dx[arg[i]] += dy[i];
}
void maxpool2d_relu_backward(const float* dy, const float* y, const std::int32_t* arg, float* dx, int n, int c, int h,
                             int w, int k) {
  const int p = h / k, q = w / k;
  const std::size_t hw = std::size_t(h) * w, pq = std::size_t(p) * q;
  split_items(long(n) * c, long(hw), [&](long plane0, long plane1) {
    for (long plane = plane0; plane < plane1; ++plane) {
      float* dp = dx + plane * hw;
      const float* gp = dy + plane * pq;
      const float* yp = y + plane * pq;
      const std::int32_t* ap = arg + plane * pq;
      for (int i = 0; i < p; ++i) {
        for (int a = 0; a < k; ++a) {  // zero the k rows of this window row (and the ragged right edge)
          float* row = dp + std::size_t(i * k + a) * w;
          for (int t = 0; t < w; ++t) row[t] = 0.f;
        }
        for (int j = 0; j < q; ++j)
          if (yp[i * q + j] > 0.f) dx[ap[i * q + j]] = gp[i * q + j];
      }
      for (int r = p * k; r < h; ++r)  // ragged bottom rows
        for (int t = 0; t < w; ++t) dp[std::size_t(r) * w + t] = 0.f;
    }
  });
}

float softmax_xent_forward_backward(const float* logits, const std::int32_t* labels, int n, int classes,
                                    float* dlogits) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + std::size_t(i) * classes;
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < classes; ++j) mx = std::max(mx, z[j]);
    double s = 0;
    for (int j = 0; j < classes; ++j) s += std::exp(double(z[j]) - mx);
    const double lse = mx + std::log(s);
    total += lse - z[labels[i]];
    if (dlogits) {
      float* d = dlogits + std::size_t(i) * classes;
      for (int j = 0; j < classes; ++j)
        d[j] = static_cast<float>((std::exp(double(z[j]) - lse) - (j == labels[i] ? 1.0 : 0.0)) / n);
    }
  }
  return static_cast<float>(total / n);
}

float mse_forward_backward(const float* pred, const float* target, std::size_t count, float* dpred) {
  double s = 0;
  const float scale = 2.f / static_cast<float>(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float d = pred[i] - target[i];
    s += double(d) * d;
    if (dpred) dpred[i] = scale * d;
  }
  return static_cast<float>(s / count);
}

void sgd_momentum_step(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, bool first) {
  if (momentum == 0.f) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
    return;
  }
  split_items(long(n), 3, [&](long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
      const float b = first ? g[i] : momentum * buf[i] + g[i];
      buf[i] = b;
      p[i] -= lr * b;
    }
  });
}

void adam_step(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
               long step) {
  // PyTorch's (non-fused) formula: p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
  const float bc1 = 1.f - std::pow(b1, static_cast<float>(step));
  const float bc2s = std::sqrt(1.f - std::pow(b2, static_cast<float>(step)));
  const float step_size = lr / bc1;
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2s + eps);
  }
}

}  // namespace dlb::cpu
