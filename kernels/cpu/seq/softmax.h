// Row softmax, forward and backward (nn.Softmax(dim=-1) / F.softmax over the last axis), fp32, and
// the fused classifier (softmax + cross-entropy, nn.CrossEntropyLoss()), with for softmax
// an optional causal pattern for attention scores: row r of a [.., Tq, cols] stack sees its first
// min(r % Tq + 1, cols) columns (torch's is_causal, tril(ones(Tq, Tk)), top-left aligned); the rest
// of the row is written 0.
// Napkin math per element: forward ~5 flops + 1 exp, 8 bytes (read x, write y; the max and sum
// passes hit cache for rows up to ~100k floats); backward ~4 flops, 12 bytes.
#pragma once

namespace dlb::cpu::seq {

// y[r, :] = softmax(x[r, :]); causal_tq = 0: every column, else the causal pattern above.
void softmax_forward(const float* x, float* y, long rows, int cols, int causal_tq = 0);
// dx = y * (dy - sum(dy * y)) per row (y from forward); same pattern.
void softmax_backward(const float* y, const float* dy, float* dx, long rows, int cols, int causal_tq = 0);

// Fused classifier: the mean cross-entropy of softmax(logits) over the rows whose target is >= 0
// (a negative target is ignored, as ignore_index=-100), returned; losses[r] (may be null) the row's
// -log p[target] (0 ignored). dlogits (may be null, may alias logits) = (softmax - onehot) / count,
// 0 in ignored rows and in the padding columns [V, ld). The probabilities are written once, into
// dlogits (exp, then scaled in place), never kept beside it; 1 exp per element.
// Napkin math per row of V: ~6V flops + V exps, 12V bytes (logits read twice from cache, dlogits
// written) -- at GPT-2's V = 50257 the row (200 KB) stays in L2 between the passes.
// Throws std::invalid_argument for a target >= V.
float classifier_forward_backward(const float* logits, const int* targets, long rows, int V, int ld, float* losses,
                                  float* dlogits);
double classifier_forward_backward_ref(const double* logits, const int* targets, long rows, int V, int ld,
                                       double* losses, double* dlogits);

// fp64 references.
void softmax_forward_ref(const double* x, double* y, long rows, int cols, int causal_tq = 0);
void softmax_backward_ref(const double* y, const double* dy, double* dx, long rows, int cols, int causal_tq = 0);

// Columns of row r that the pattern keeps.
inline int softmax_valid_cols(long r, int cols, int causal_tq) {
  if (causal_tq <= 0) return cols;
  const long v = r % causal_tq + 1;
  return v < cols ? int(v) : cols;
}

}  // namespace dlb::cpu::seq
