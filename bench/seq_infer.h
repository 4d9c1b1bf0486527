// Suite seq's shared pieces (bench/seq.cpp registers the suite): a case's sizes and data, and the
// op=infer case of ours (bench/seq_infer.cpp), on the CPU and on a CUDA device.
#pragma once
#include <memory>
#include <string>

#include "bench/case.h"
#include "models/seq_zoo.h"

namespace dlb::bench::seq {

// Gradients of a sequence step go through softmax, LayerNorm and up to 32 recurrent steps: fp32
// against fp64 agrees to a few 1e-6 of each tensor's scale (max |ref|); 1e-4 leaves room and still
// catches a wrong term (a lost gradient path is off by ~1).
constexpr double kSeqTolerance = 1e-4;

// The case's sizes, from the axes (layers 0: the seed's, 1 for rnn, 2 for lstm and transformer), and
// its data: a text file's windows, read once in expand (they set c.vocab), or synthetic, made per case.
struct Sizes {
  models::SeqConfig c;
  int samples = 0;
  std::string dataset = "synthetic";              // the records' name: synthetic or text:BASENAME
  std::shared_ptr<const models::TokenData> text;  // text:FILE; null: synthetic
};

// `n` windows at least (a batch of them), the same for ours and the peer.
std::shared_ptr<const models::TokenData> windows_for(const Sizes& s, int n);

// op=infer, impl ours (or onednn / cudnn, through s.c.impl): forward-only latency of one batch of
// `model` (a sequence model with sizes `s`, or an image model of the zoo) on `device` (cpu or cuda:N);
// `cuda_graph` (cuda:N): the trainer's forward captured once and replayed (TrainOptions::cuda_graph).
std::unique_ptr<Case> make_infer_case(const std::string& model, const Sizes& s, const std::string& device, int batch,
                                      bool quick, bool cuda_graph);

// op=infer, impl pytorch, of an image model of the zoo: the PyTorch peer (bench/peers/pytorch_infer.py)
// on our weights and batch, checked by its forward loss against ours, then timed call by call.
std::unique_ptr<Case> make_image_peer_infer_case(const std::string& model, const std::string& device, int batch);

}  // namespace dlb::bench::seq
