// PyTorch parity of the sequence models (issue 29's proof): dlbench writes a model's initial weights
// and `steps` batches into a folder, the peer (bench/peers/pytorch_seq.py --parity) loads them into
// the seed's own modules (nn.RNN, nn.LSTM, nn.Transformer) and trains on the same batches with
// Adam(1e-3); the losses of every step and each parameter's gradient after step 1 and after the last
// step are compared with ours (the CPU fp32 step). Dropout is off (p = 0) on both sides.
// The peer trains the same bundle in float64 too: after a few Adam steps fp32 rounding alone moves
// the weights (Adam's first steps are +-lr whatever a gradient's size, so a near-zero gradient's
// rounding picks the sign), and PyTorch's own fp32 distance from fp64 is the yardstick for ours.
#pragma once
#include <string>
#include <vector>

#include "models/seq_zoo.h"

namespace dlb::bench {

struct SeqParity {
  std::string torch;                   // the peer's torch.__version__
  std::vector<double> ours, theirs, exact;  // the loss of each step: ours, PyTorch fp32, PyTorch fp64
  struct Grads {
    int step = 0;
    double worst = 0;                  // the largest per-tensor relative L2 error (ours vs PyTorch's fp32)
    std::string worst_name;
    // Per tensor, vs PyTorch's fp64: ours and PyTorch's fp32 error; the largest of ours over
    // max(theirs, floor) (<= 1: ours as close to exact as PyTorch's fp32 is) and its tensor.
    double worst_ratio = 0, ours_exact = 0, theirs_exact = 0;
    std::string ratio_name;
  };
  std::vector<Grads> grads;            // after step 1 and after the last
  double loss_rel(std::size_t k) const;  // |ours - theirs| / |theirs| at step k (0-based)
  double loss_rel_exact(std::size_t k, bool torch32) const;  // ours (or PyTorch fp32) vs PyTorch fp64
  static constexpr double kRatioFloor = 1e-4;  // a tensor's fp32 error below this is not a yardstick
};

// Runs the check in `dir` (made, and left for inspection) with interpreter `python`; batch n,
// `steps` steps. Throws dlb::Unsupported when the peer cannot run (torch missing: its exit 3).
SeqParity seq_parity(models::SeqConfig c, int n, int steps, const std::string& python, const std::string& dir);

}  // namespace dlb::bench
