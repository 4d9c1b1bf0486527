// Token (+ position) embedding on the GPU, the twin of kernels/cpu/seq/embedding.h: forward a gather,
// backward a deterministic scatter-add. Backward sorts the positions by token (CUB's stable radix
// sort), then one block per distinct token sums its dy rows in position order: the same bits on
// every run (PyTorch's CUDA embedding backward sorts too). Tokens must be in [0, V): the kernels do
// not check them (the CPU path and the data loaders do).
// Napkin math: forward 8C bytes a token (+4C with pos); backward 12C bytes a token + the sort
// (~8 bytes a token a radix pass).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlb::cuda::seq {

// Device scratch for embedding_backward over n = B*T tokens (bytes), sized once per n.
std::size_t embedding_backward_scratch_bytes(int B, int T);

void embedding_forward(const std::int32_t* tokens, int B, int T, const float* w, int C, const float* pos, float* y,
                       cudaStream_t s);
// dw += the summed dy rows of each token (accumulates, as the CPU's); dpos (may be null) += sum over b.
void embedding_backward(const std::int32_t* tokens, int B, int T, const float* dy, int C, float* dw, float* dpos,
                        void* scratch, cudaStream_t s);

// The positions alone (GPT-2's wpe, models/layers/position_embedding.h): forward is add_broadcast
// (elementwise.h) of the table's first T rows; backward dpos[t, :] += sum over b of dy[b, t, :], b in
// order (one thread per (t, c), coalesced over c: 4 B bytes read a position-channel).
void position_embedding_backward(int B, int T, const float* dy, int C, float* dpos, cudaStream_t s);

}  // namespace dlb::cuda::seq
