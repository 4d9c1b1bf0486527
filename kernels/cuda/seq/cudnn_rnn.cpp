// cuDNN RNN layer (see cudnn_rnn.h): descriptors and buffers built once per shape, PyTorch's
// parameter blocks located in the weight space through cudnnGetRNNWeightParams.
#include "kernels/cuda/seq/cudnn_rnn.h"

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"

namespace dlb::cuda::seq {

using cpu::seq::RnnCell;

struct CudnnRnn::Impl {
  cpu::seq::RnnShape s;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t drop = nullptr;
  cudnnRNNDataDescriptor_t xd = nullptr, yd = nullptr;
  cudnnTensorDescriptor_t hd = nullptr, md = nullptr, bd = nullptr;
  std::size_t wbytes = 0, work = 0, reserve = 0;
  DeviceBuffer<char> wspace, dwspace, workspace, reservespace;
  DeviceBuffer<std::int32_t> lengths;
  DeviceBuffer<float> zeros;  // for null states and gradients: max(T B H, B H) floats
  DeviceBuffer<float> spare_dx;  // the dx cuDNN must write when the caller wants none: made once
  // Where each of PyTorch's blocks lives: per linLayerID, the matrix and bias offsets (bytes).
  std::vector<std::size_t> m_off, b_off;

  // linLayerIDs: input matrices of gates 0..G-1, then the recurrent ones (PyTorch's row blocks g H ..)
  int ids() const { return s.cell == RnnCell::lstm ? 8 : 2; }
};

CudnnRnn::CudnnRnn(const cpu::seq::RnnShape& s, bool allow_tf32) : p_(new Impl) {
  s.check();
  Impl& m = *p_;
  m.s = s;
  cudnnHandle_t h = cudnn_handle_on(nullptr);
  DLB_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&m.drop));
  DLB_CUDNN_CHECK(cudnnSetDropoutDescriptor(m.drop, h, 0.f, nullptr, 0, 0));  // no dropout: no RNG state
  DLB_CUDNN_CHECK(cudnnCreateRNNDescriptor(&m.rnn));
  DLB_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(m.rnn, CUDNN_RNN_ALGO_STANDARD,
                                           s.cell == RnnCell::lstm ? CUDNN_LSTM : CUDNN_RNN_TANH,
                                           CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                           CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                           allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH, s.I, s.H, s.H, 1, m.drop,
                                           CUDNN_RNN_PADDED_IO_ENABLED));  // the *_UNPACKED layouts need it
  const cudnnRNNDataLayout_t layout =
      s.batch_first ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  const std::vector<int> len(s.B, s.T);
  DLB_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&m.xd));
  DLB_CUDNN_CHECK(cudnnSetRNNDataDescriptor(m.xd, CUDNN_DATA_FLOAT, layout, s.T, s.B, s.I, len.data(), nullptr));
  DLB_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&m.yd));
  DLB_CUDNN_CHECK(cudnnSetRNNDataDescriptor(m.yd, CUDNN_DATA_FLOAT, layout, s.T, s.B, s.H, len.data(), nullptr));
  const int dims[3] = {1, s.B, s.H}, strides[3] = {s.B * s.H, s.H, 1};
  DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.hd));
  DLB_CUDNN_CHECK(cudnnSetTensorNdDescriptor(m.hd, CUDNN_DATA_FLOAT, 3, dims, strides));
  DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.md));
  DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.bd));

  DLB_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, m.rnn, &m.wbytes));
  DLB_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, m.rnn, CUDNN_FWD_MODE_TRAINING, m.xd, &m.work, &m.reserve));
  // forward(train false) runs CUDNN_FWD_MODE_INFERENCE: its workspace is that mode's query (no reserve).
  std::size_t infer_work = 0, infer_reserve = 0;
  DLB_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, m.rnn, CUDNN_FWD_MODE_INFERENCE, m.xd, &infer_work, &infer_reserve));
  m.work = std::max(m.work, infer_work);
  m.wspace = DeviceBuffer<char>(m.wbytes);
  m.dwspace = DeviceBuffer<char>(m.wbytes);
  m.workspace = DeviceBuffer<char>(m.work ? m.work : 1);
  m.reservespace = DeviceBuffer<char>(m.reserve ? m.reserve : 1);
  m.lengths = DeviceBuffer<std::int32_t>(s.B);
  m.lengths.upload(len.data(), len.size());
  const std::size_t nz = std::max(std::size_t(s.rows()) * s.H, std::size_t(s.B) * s.H);
  m.zeros = DeviceBuffer<float>(nz);
  DLB_CUDA_CHECK(cudaMemset(m.zeros.data(), 0, nz * sizeof(float)));
  for (int id = 0; id < m.ids(); ++id) {
    void *ma = nullptr, *ba = nullptr;
    DLB_CUDNN_CHECK(cudnnGetRNNWeightParams(h, m.rnn, 0, m.wbytes, m.wspace.data(), id, m.md, &ma, m.bd, &ba));
    m.m_off.push_back(std::size_t(static_cast<char*>(ma) - m.wspace.data()));
    m.b_off.push_back(std::size_t(static_cast<char*>(ba) - m.wspace.data()));
  }
}

CudnnRnn::~CudnnRnn() {
  Impl& m = *p_;
  if (m.bd) cudnnDestroyTensorDescriptor(m.bd);
  if (m.md) cudnnDestroyTensorDescriptor(m.md);
  if (m.hd) cudnnDestroyTensorDescriptor(m.hd);
  if (m.yd) cudnnDestroyRNNDataDescriptor(m.yd);
  if (m.xd) cudnnDestroyRNNDataDescriptor(m.xd);
  if (m.rnn) cudnnDestroyRNNDescriptor(m.rnn);
  if (m.drop) cudnnDestroyDropoutDescriptor(m.drop);
}

std::size_t CudnnRnn::weight_bytes() const { return p_->wbytes; }
std::size_t CudnnRnn::reserve_bytes() const { return p_->reserve; }

void CudnnRnn::set_weights(const cpu::seq::RnnWeights& w, cudaStream_t st) {
  Impl& m = *p_;
  const int G = m.s.gates(), H = m.s.H;
  for (int id = 0; id < m.ids(); ++id) {
    const bool input = id < G;
    const int g = id % G, cols = input ? m.s.I : H;
    const float* mat = (input ? w.w_ih : w.w_hh) + std::size_t(g) * H * cols;
    const float* bias = input ? w.b_ih : w.b_hh;
    DLB_CUDA_CHECK(cudaMemcpyAsync(m.wspace.data() + m.m_off[id], mat, sizeof(float) * H * cols,
                                   cudaMemcpyDeviceToDevice, st));
    DLB_CUDA_CHECK(cudaMemcpyAsync(m.wspace.data() + m.b_off[id], bias ? bias + std::size_t(g) * H : m.zeros.data(),
                                   sizeof(float) * H, cudaMemcpyDeviceToDevice, st));
  }
}

void CudnnRnn::forward(const float* x, const float* h0, const float* c0, float* y, float* hn, float* cn, bool train,
                       cudaStream_t st) {
  Impl& m = *p_;
  const bool lstm = m.s.cell == RnnCell::lstm;
  DLB_CUDNN_CHECK(
      cudnnRNNForward(cudnn_handle_on(st), m.rnn, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                      m.lengths.data(), m.xd, x, m.yd, y, m.hd, h0 ? h0 : m.zeros.data(), hn, m.hd,
                      lstm ? (c0 ? c0 : m.zeros.data()) : nullptr, lstm ? cn : nullptr, m.wbytes, m.wspace.data(),
                      m.work, m.workspace.data(), train ? m.reserve : 0, train ? m.reservespace.data() : nullptr));
}

void CudnnRnn::backward(const float* x, const float* h0, const float* c0, const float* y, const float* dy,
                        const float* dhn, const float* dcn, float* dx, float* dh0, float* dc0,
                        const cpu::seq::RnnGrads& g, cudaStream_t st) {
  Impl& m = *p_;
  const bool lstm = m.s.cell == RnnCell::lstm;
  cudnnHandle_t h = cudnn_handle_on(st);
  const float* z = m.zeros.data();
  // An output cuDNN must write even when the caller does not want it: a buffer kept for the next
  // calls (a per-call one would need a cudaMalloc and a stream sync before its free, every step).
  if (!dx && m.spare_dx.size() == 0) m.spare_dx = DeviceBuffer<float>(std::size_t(m.s.rows()) * m.s.I);
  DLB_CUDNN_CHECK(cudnnRNNBackwardData_v8(h, m.rnn, m.lengths.data(), m.yd, y, dy ? dy : z, m.xd,
                                          dx ? dx : m.spare_dx.data(), m.hd, h0 ? h0 : z, dhn ? dhn : z, dh0, m.hd,
                                          lstm ? (c0 ? c0 : z) : nullptr, lstm ? (dcn ? dcn : z) : nullptr,
                                          lstm ? dc0 : nullptr, m.wbytes, m.wspace.data(), m.work, m.workspace.data(),
                                          m.reserve, m.reservespace.data()));
  DLB_CUDA_CHECK(cudaMemsetAsync(m.dwspace.data(), 0, m.wbytes, st));  // the v8 call adds into it
  DLB_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(h, m.rnn, CUDNN_WGRAD_MODE_ADD, m.lengths.data(), m.xd, x, m.hd,
                                             h0 ? h0 : z, m.yd, y, m.wbytes, m.dwspace.data(), m.work,
                                             m.workspace.data(), m.reserve, m.reservespace.data()));
  const int G = m.s.gates(), H = m.s.H;
  for (int id = 0; id < m.ids(); ++id) {
    const bool input = id < G;
    const int gate = id % G, cols = input ? m.s.I : H;
    float* mat = input ? g.dw_ih : g.dw_hh;
    float* bias = input ? g.db_ih : g.db_hh;
    if (mat)
      DLB_CUDA_CHECK(cudaMemcpyAsync(mat + std::size_t(gate) * H * cols, m.dwspace.data() + m.m_off[id],
                                     sizeof(float) * H * cols, cudaMemcpyDeviceToDevice, st));
    if (bias)
      DLB_CUDA_CHECK(cudaMemcpyAsync(bias + std::size_t(gate) * H, m.dwspace.data() + m.b_off[id], sizeof(float) * H,
                                     cudaMemcpyDeviceToDevice, st));
  }
}

}  // namespace dlb::cuda::seq
