// Suite "train": the four seed models (net128, mlp, convnet, autoencoder) x batch sweep x devices x
// GPU input pipelines (axis "input"; --input sets it). Each case trains one epoch of seeded
// synthetic images shaped for its model (axis "images") and is verified like the lecture's: one
// step's loss and gradients against the fp64 reference (CPU) or the CPU path (GPU).
#include "bench/case.h"

namespace dlb::bench {

// Defined in bench/lecture.cpp: the training cases of one model x batch x images on one device, one
// per GPU input pipeline; `lead` holds the case's first keys (model, ...).
void add_training_cases(std::vector<CaseSpec>& cases, const std::string& suite,
                        std::vector<std::pair<std::string, json>> lead, const std::string& device, long long batch,
                        long long images, const SuiteOptions& o, bool lecture);

Suite train_suite() {
  Suite s;
  s.name = "train";
  s.description = "Training epochs of the four seed models: axes model, batch (1..512), images, input (GPU pipelines)";
  s.expand = [](const SuiteOptions& o) {
    std::vector<CaseSpec> cases;
    const auto models = axis_strings(o, "model", {"net128", "mlp", "convnet", "autoencoder"});
    const auto batches = axis_ints(o, "batch", {1, 4, 16, 64, 256, 512});
    const auto images_axis = o.axes.contains("size") ? axis_ints(o, "size") : axis_ints(o, "images", {o.quick ? 512 : 8192});
    for (const auto& m : models)
      for (long long images : images_axis)
        for (long long b : batches)
          for (const auto& dev : o.devices) add_training_cases(cases, "train", {{"model", m}}, dev, b, images, o, false);
    return cases;
  };
  return s;
}

}  // namespace dlb::bench
