// Conv2dShape and the fp64 reference convolution: direct loops, the only reference the CPU and GPU
// kernels and the models' grad checks are checked against.
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>
#include <sstream>

namespace dlb {

bool Conv2dShape::valid() const {
  if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1 || r < 1 || s < 1) return false;
  if (pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1) return false;
  if (h + 2 * pad_h < r || w + 2 * pad_w < s) return false;  // output would be < 1x1
  return p() >= 1 && q() >= 1;
}

std::string Conv2dShape::str() const {
  std::ostringstream o;
  o << "n" << n << "_c" << c << "_h" << h << "_w" << w << "_k" << k << "_r" << r << "_s" << s << "_p" << pad_h;
  if (pad_w != pad_h) o << "x" << pad_w;
  o << "_u" << stride_h;
  if (stride_w != stride_h) o << "x" << stride_w;
  return o.str();
}

namespace cpu {
using detail::check_shape;

// Single elements, in gather form: output index `idx` (NCHW / NCHW / KCRS order) in fp64. The
// backward ones gather what the scatter-form references below add up, so a sampled check computes its
// reference a second, independent way.
namespace {
template <class T>
double forward_at(const Conv2dShape& sh, const T* x, const T* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int q = int(idx % Q), p = int(idx / Q % P), k = int(idx / (std::size_t(P) * Q) % sh.k);
  const int n = int(idx / (std::size_t(P) * Q * sh.k));
  double acc = 0;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int s = 0; s < sh.s; ++s) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
      }
    }
  return acc;
}

template <class T>
double backward_data_at(const Conv2dShape& sh, const T* dy, const T* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int iw = int(idx % sh.w), ih = int(idx / sh.w % sh.h), c = int(idx / (std::size_t(sh.h) * sh.w) % sh.c);
  const int n = int(idx / (std::size_t(sh.h) * sh.w * sh.c));
  double acc = 0;
  for (int r = 0; r < sh.r; ++r) {
    const int t = ih + sh.pad_h - r;  // = p * stride
    if (t < 0 || t % sh.stride_h) continue;
    const int p = t / sh.stride_h;
    if (p >= P) continue;
    for (int s = 0; s < sh.s; ++s) {
      const int u = iw + sh.pad_w - s;
      if (u < 0 || u % sh.stride_w) continue;
      const int q = u / sh.stride_w;
      if (q >= Q) continue;
      for (int k = 0; k < sh.k; ++k)
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
    }
  }
  return acc;
}

template <class T>
double backward_filter_at(const Conv2dShape& sh, const T* x, const T* dy, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int s = int(idx % sh.s), r = int(idx / sh.s % sh.r), c = int(idx / (std::size_t(sh.r) * sh.s) % sh.c);
  const int k = int(idx / (std::size_t(sh.r) * sh.s * sh.c));
  double acc = 0;
  for (int n = 0; n < sh.n; ++n)
    for (int p = 0; p < P; ++p) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int q = 0; q < Q; ++q) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
      }
    }
  return acc;
}

template <class T>
void forward(const Conv2dShape& sh, const T* x, const T* w, const T* bias, double* y) {
  check_shape(sh);
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  for (std::size_t i = 0; i < sh.y_size(); ++i)
    y[i] = forward_at(sh, x, w, i) + (bias ? bias[i / PQ % sh.k] : 0.0);
}

template <class T>
void backward_data(const Conv2dShape& sh, const T* dy, const T* w, double* dx) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  std::fill(dx, dx + sh.x_size(), 0.0);
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dx[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw] +=
                    g * double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
              }
            }
        }
}

template <class T>
void backward_filter(const Conv2dShape& sh, const T* x, const T* dy, double* dw, double* db, bool accumulate) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  if (!accumulate) {
    std::fill(dw, dw + sh.w_size(), 0.0);
    if (db) std::fill(db, db + sh.k, 0.0);
  }
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          if (db) db[k] += g;
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dw[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s] +=
                    g * double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
              }
            }
        }
}
}  // namespace

double conv2d_forward_direct_at(const Conv2dShape& sh, const float* x, const float* w, std::size_t idx) {
  return forward_at(sh, x, w, idx);
}
double conv2d_backward_data_direct_at(const Conv2dShape& sh, const float* dy, const float* w, std::size_t idx) {
  return backward_data_at(sh, dy, w, idx);
}
double conv2d_backward_filter_direct_at(const Conv2dShape& sh, const float* x, const float* dy, std::size_t idx) {
  return backward_filter_at(sh, x, dy, idx);
}
void conv2d_forward_direct(const Conv2dShape& sh, const float* x, const float* w, const float* bias, double* y) {
  forward(sh, x, w, bias, y);
}
void conv2d_forward_direct(const Conv2dShape& sh, const double* x, const double* w, const double* bias, double* y) {
  forward(sh, x, w, bias, y);
}
void conv2d_backward_data_direct(const Conv2dShape& sh, const float* dy, const float* w, double* dx) {
  backward_data(sh, dy, w, dx);
}
void conv2d_backward_data_direct(const Conv2dShape& sh, const double* dy, const double* w, double* dx) {
  backward_data(sh, dy, w, dx);
}
void conv2d_backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, double* dw, double* db) {
  backward_filter(sh, x, dy, dw, db, false);
}
void conv2d_backward_filter_direct(const Conv2dShape& sh, const double* x, const double* dy, double* dw, double* db,
                                   bool accumulate) {
  backward_filter(sh, x, dy, dw, db, accumulate);
}

}  // namespace cpu
}  // namespace dlb
