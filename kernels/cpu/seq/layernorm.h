// LayerNorm over the last axis (nn.LayerNorm(C), eps 1e-5, elementwise affine), fp32, forward and
// backward. Rows of C floats; mean and rstd = 1/sqrt(var + eps) (biased variance, as PyTorch) are
// kept per row for backward.
// Napkin math per row of C: forward ~8C flops, 12C bytes (x, y, w/b cached); backward ~12C flops,
// 16C bytes (x, dy, dx) + the dw/db partials (2C floats per chunk of 32 rows).
#pragma once

namespace dlb::cpu::seq {

constexpr float kLayerNormEps = 1e-5f;  // nn.LayerNorm's default

// y = (x - mean) * rstd * w + b; w, b may be null (no affine); mean, rstd: [rows] (may be null).
void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, long rows,
                       int C, float eps = kLayerNormEps);
// dx (overwritten), dw and db (overwritten; null: not wanted) from dy, x and forward's mean / rstd.
// dw, db are summed over fixed chunks of rows, the chunks in order: the same bits on any thread count.
void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                        float* dx, float* dw, float* db, long rows, int C);

// fp64 references (dw, db overwritten; may be null).
void layernorm_forward_ref(const double* x, const double* w, const double* b, double* y, long rows, int C,
                           double eps = kLayerNormEps);
void layernorm_backward_ref(const double* dy, const double* x, const double* w, double* dx, double* dw, double* db,
                            long rows, int C, double eps = kLayerNormEps);

}  // namespace dlb::cpu::seq
