// The CUDA trainer (placeholder while the GPU step is written): reports the backend as unsupported.
#include "kernels/common/errors.h"
#include "models/trainer.h"

namespace dlb::models {

std::unique_ptr<Trainer> make_gpu_trainer(Sequential&, const OptimizerConfig&, const TrainOptions&) {
  throw Unsupported("the CUDA training step is not built yet");
}

}  // namespace dlb::models
