// Suite "train": the four seed models (net128, mlp, convnet, autoencoder) x batch sweep x devices x
// GPU input pipelines (axis "input"; --input sets it). Each case trains one epoch of seeded
// synthetic images shaped for its model (axis "images") and is verified like the lecture's: one
// step's loss and gradients against the fp64 reference (CPU) or the CPU path (GPU).
#include "bench/suite.h"
#include "bench/training_cases.h"

namespace dlb::bench {

namespace {
std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  for (const auto& m : axis_strings(o, "model"))
    for (long long images : axis_ints(o, "images"))
      for (long long b : axis_ints(o, "batch"))
        for (const auto& dev : o.devices) add_training_cases(cases, "train", {{"model", m}}, dev, b, images, o, false);
  return cases;
}
}  // namespace

DLB_SUITE(train)
    .about("Training epochs of the four seed models: axes model, batch (1..512), images, input (GPU pipelines)")
    .axis("model", {"net128", "mlp", "convnet", "autoencoder"})
    .axis("batch", {1, 4, 16, 64, 256, 512}, {4, 64})
    .axis("images", {8192}, {512})
    .axis("input", {"pageable", "pinned", "prefetch", "resident"}, {"pageable", "resident"})
    .axis("dtype", {"fp32"})  // GPU autocast: tf32, fp16, bf16
    .takes({flag::batch(), flag::images(), flag::dtype(), flag::input(), flag::cuda_graph(), flag::profile()})
    .cases(expand);

}  // namespace dlb::bench
