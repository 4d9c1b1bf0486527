// Token embedding (nn.Embedding(V, C)), optionally plus a learned position embedding (GPT-2's wpe,
// nn.Embedding(T_max, C) indexed by position), fp32, forward (gather) and backward (scatter-add).
// Tokens are [B, T] row-major (batch_first; a sequence-first [T, B] stack is the same call with
// pos = null, or B and T swapped where positions matter), y is [B*T, C].
// Backward adds in token order for every column (columns split over the threads): repeated tokens
// sum in the same order on any thread count, so the bits are deterministic (PyTorch's CPU
// index_add is too; its CUDA embedding backward sorts first).
// Napkin math: forward 0 flops, 8C bytes per token (+4C with pos); backward C flops, 12C bytes.
#pragma once
#include <cstdint>

namespace dlb::cpu::seq {

// y[b, t, :] = w[tokens[b, t], :] (+ pos[t, :] when pos is given). Throws dlb::InputError naming the
// position of a token outside [0, V).
void embedding_forward(const std::int32_t* tokens, int B, int T, const float* w, int V, int C, const float* pos,
                       float* y);
// dw[v, :] += sum of dy rows whose token is v (dw NOT cleared: gradients accumulate, as a tied LM
// head adds into the same table); dpos[t, :] += sum over b of dy[b, t, :] when dpos is given.
void embedding_backward(const std::int32_t* tokens, int B, int T, const float* dy, int V, int C, float* dw,
                        float* dpos);

void embedding_forward_ref(const std::int32_t* tokens, int B, int T, const double* w, int V, int C, const double* pos,
                           double* y);
void embedding_backward_ref(const std::int32_t* tokens, int B, int T, const double* dy, int V, int C, double* dw,
                            double* dpos);

}  // namespace dlb::cpu::seq
