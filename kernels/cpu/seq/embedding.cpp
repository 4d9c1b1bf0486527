// Embedding gather / scatter-add (see embedding.h). Plain loops: a copy and an add per element,
// which the compiler vectorizes; the work is the memory traffic.
#include "kernels/cpu/seq/embedding.h"

#include <cstring>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/parallel.h"

namespace dlb::cpu::seq {
namespace {
void check_tokens(const std::int32_t* tokens, long n, int T, int V) {
  for (long i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw InputError("embedding: token " + std::to_string(tokens[i]) + " at [" + std::to_string(i / T) + ", " +
                       std::to_string(i % T) + "] is outside the vocabulary of " + std::to_string(V));
}
}  // namespace

void embedding_forward_ref(const std::int32_t* tokens, int B, int T, const double* w, int V, int C, const double* pos,
                           double* y) {
  check_tokens(tokens, long(B) * T, T, V);
  for (long i = 0; i < long(B) * T; ++i)
    for (int c = 0; c < C; ++c) y[i * C + c] = w[long(tokens[i]) * C + c] + (pos ? pos[(i % T) * C + c] : 0.0);
}

void embedding_backward_ref(const std::int32_t* tokens, int B, int T, const double* dy, int V, int C, double* dw,
                            double* dpos) {
  check_tokens(tokens, long(B) * T, T, V);
  for (long i = 0; i < long(B) * T; ++i)
    for (int c = 0; c < C; ++c) {
      dw[long(tokens[i]) * C + c] += dy[i * C + c];
      if (dpos) dpos[(i % T) * C + c] += dy[i * C + c];
    }
}

void embedding_forward(const std::int32_t* tokens, int B, int T, const float* w, int V, int C, const float* pos,
                       float* y) {
  const long n = long(B) * T;
  check_tokens(tokens, n, T, V);
  parallel_rows(n, 2L * C, [&](long lo, long hi) {
    for (long i = lo; i < hi; ++i) {
      const float* src = w + long(tokens[i]) * C;
      float* dst = y + i * C;
      if (!pos) {
        std::memcpy(dst, src, sizeof(float) * C);
        continue;
      }
      const float* p = pos + (i % T) * C;
      for (int c = 0; c < C; ++c) dst[c] = src[c] + p[c];
    }
  });
}

void embedding_backward(const std::int32_t* tokens, int B, int T, const float* dy, int V, int C, float* dw,
                        float* dpos) {
  const long n = long(B) * T;
  check_tokens(tokens, n, T, V);
  // Columns in slices of 64 floats (one cache line per row a slice touches, never shared between
  // tasks), every slice walking the tokens in order.
  constexpr int kSlice = 64;
  const long slices = (C + kSlice - 1) / kSlice;
  parallel_rows(slices, n * kSlice, [&](long lo, long hi) {
    const int c0 = int(lo * kSlice), c1 = int(std::min<long>(C, hi * kSlice));
    for (long i = 0; i < n; ++i) {
      const float* g = dy + i * C;
      float* d = dw + long(tokens[i]) * C;
      for (int c = c0; c < c1; ++c) d[c] += g[c];
      if (dpos) {
        float* dp = dpos + (i % T) * C;
        for (int c = c0; c < c1; ++c) dp[c] += g[c];
      }
    }
  });
}

}  // namespace dlb::cpu::seq
