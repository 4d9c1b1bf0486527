// One recurrent layer over a whole sequence, fp32, forward and backward through time, with
// PyTorch's semantics and parameter layout (nn.RNN(nonlinearity='tanh'), nn.LSTM; one layer, one
// direction -- stacked layers are one call per layer):
//   weight_ih [G*H, I], weight_hh [G*H, H], bias_ih [G*H], bias_hh [G*H]; G = 1 (tanh) or 4 (LSTM),
//   LSTM gate rows in order i, f, g, o:  i = s(a_i), f = s(a_f), g = tanh(a_g), o = s(a_o)
//   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t);   tanh cell: h_t = tanh(a),
//   a = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh.
// x [T, B, I] and y [T, B, H] (or [B, T, .] with batch_first); h0, c0, hn, cn [B, H].
// The input GEMM runs once for all T*B rows, the recurrent GEMM once per step (into the strided
// rows of that step), and the gate math in one fused pass per step; backward mirrors it (dx, dW_ih
// and dW_hh one GEMM each over all steps). fp32 GEMMs on small_gemm.h or OpenBLAS, by rnn.cpp's
// dispatch table.
// Napkin math per step (forward): 2 B G H (I + H) flops in GEMMs + ~30 B H (LSTM) pointwise;
// backward twice the GEMM flops. Bytes: the weights (G H (I + H) floats) are re-read every step --
// from cache while they fit (LSTM H = 512: 8 MB, beyond L2), which makes small batches memory-bound.
#pragma once
#include <vector>

namespace dlb::cpu::seq {

enum class RnnCell { tanh, lstm };

struct RnnShape {
  RnnCell cell = RnnCell::lstm;
  int T = 0, B = 0, I = 0, H = 0;  // steps, batch, input features, hidden features
  bool batch_first = false;        // x, y, dx, dy as [B, T, .]
  // bf16 autocast (rnn_forward / rnn_backward only): every GEMM reads its operands rounded to bf16
  // (kernels/cpu/bf16_gemm.h, fp32 sums and output), the weights cast once per call; the gate math,
  // the cell state c and the hidden state h stay fp32, as PyTorch keeps an RNN's state.
  bool bf16 = false;
  int gates() const { return cell == RnnCell::lstm ? 4 : 1; }
  long rows() const { return long(T) * B; }
  // x's / y's row of step t, batch b
  long row(int t, int b) const { return batch_first ? long(b) * T + t : long(t) * B + b; }
  void check() const;  // throws std::invalid_argument unless every size is positive
};

// PyTorch's parameters of one layer (T = float; double for the references); the biases may be
// null (bias=False). Their gradients, overwritten (null: not wanted), or added into with
// `accumulate` (rnn_backward only: a layer's Param::grad directly, no scratch and add pass);
// db_ih and db_hh are equal (both sum dA).
template <class T>
struct RnnParams {
  const T* w_ih = nullptr;
  const T* w_hh = nullptr;
  const T* b_ih = nullptr;
  const T* b_hh = nullptr;
};
template <class T>
struct RnnParamGrads {
  T* dw_ih = nullptr;
  T* dw_hh = nullptr;
  T* db_ih = nullptr;
  T* db_hh = nullptr;
  bool accumulate = false;
};
using RnnWeights = RnnParams<float>;
using RnnGrads = RnnParamGrads<float>;
using RnnWeightsRef = RnnParams<double>;
using RnnGradsRef = RnnParamGrads<double>;

// What forward keeps for backward: the activated gates (x's row order), h_0..h_T and (LSTM)
// c_0..c_T, sequence-first.
std::size_t rnn_saved_floats(const RnnShape& s);

// h0, c0 may be null (zeros); hn, cn may be null. `saved` is resized to rnn_saved_floats.
void rnn_forward(const RnnShape& s, const RnnWeights& w, const float* x, const float* h0, const float* c0, float* y,
                 float* hn, float* cn, std::vector<float>& saved);
// From forward's `saved`: dy (may be null: only dhn / dcn flow back), dhn, dcn (may be null) ->
// dx, dh0, dc0 (each may be null) and the parameter gradients.
void rnn_backward(const RnnShape& s, const RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const std::vector<float>& saved, float* dx, float* dh0, float* dc0,
                  const RnnGrads& g);

// fp64 references, the same arguments in double (backward recomputes the forward states).
void rnn_forward_ref(const RnnShape& s, const RnnWeightsRef& w, const double* x, const double* h0, const double* c0,
                     double* y, double* hn, double* cn);
void rnn_backward_ref(const RnnShape& s, const RnnWeightsRef& w, const double* x, const double* h0, const double* c0,
                      const double* dy, const double* dhn, const double* dcn, double* dx, double* dh0, double* dc0,
                      const RnnGradsRef& g);

}  // namespace dlb::cpu::seq
