// --cuda-graph's check for the token models' training rows (seq and gpt2 suites): `steps` training
// steps of `graphed` (a trainer of `m` with TrainOptions::cuda_graph: the first step eager and then
// captured, the others replayed) against the same batches on `eager`, an eager trainer of `twin`
// (m's weights copied before): each step's loss, and after them each weight tensor, the worst named.
// Equal bits unless cuBLAS picks another algorithm under capture: then ~1e-7 a GEMM, which Adam's
// division by sqrt(v) can turn into a whole lr for a near-zero gradient's weight, hence the weights'
// relative L2 per tensor and 1e-4 (the image trainer's graph test's), while a replay that reused one
// step's dropout masks or a stale buffer is off by 1e-2 and more.
#pragma once
#include <functional>

#include "kernels/common/verify.h"
#include "models/model.h"
#include "models/trainer.h"

namespace dlb::bench {

constexpr double kGraphTolerance = 1e-4;

// batch(k): step k's batch (called once a step; the reference must hold for both trainers' calls).
CheckResult check_graph_steps(models::Trainer& graphed, models::Model& m, models::Trainer& eager, models::Model& twin,
                              int steps, const std::function<const models::Batch&(int)>& batch);

}  // namespace dlb::bench
