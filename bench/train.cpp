// Suite "train": the four seed models (net128, mlp, convnet, autoencoder) x batch sweep x devices x
// GPU input pipelines (axis "input"; --input sets it). Each case trains one epoch of seeded
// synthetic images shaped for its model (axis "images") and is verified like the lecture's: one
// step's loss and gradients against the fp64 reference (CPU) or the CPU path (GPU).
#include "bench/case.h"

namespace dlb::bench {

// Defined in bench/lecture.cpp.
std::unique_ptr<Case> make_training_case(const std::string& model, const std::string& device, int batch,
                                         std::size_t images, const std::string& input, bool graph, bool lecture,
                                         bool quick);
std::vector<std::string> input_modes(const SuiteOptions& o, std::vector<std::string> fallback);

Suite train_suite() {
  Suite s;
  s.name = "train";
  s.description = "Training epochs of the four seed models: axes model, batch (1..512), images, input (GPU pipelines)";
  s.expand = [](const SuiteOptions& o) {
    std::vector<CaseSpec> cases;
    const auto models = axis_strings(o, "model", {"net128", "mlp", "convnet", "autoencoder"});
    const auto batches = axis_ints(o, "batch", {1, 4, 16, 64, 256, 512});
    const auto images_axis = o.axes.contains("size") ? axis_ints(o, "size") : axis_ints(o, "images", {o.quick ? 512 : 8192});
    const auto inputs = input_modes(o, {"pageable"});
    const bool graph = o.extra.value("cuda_graph", false);
    for (const auto& m : models)
      for (long long images : images_axis) {
        if (images <= 0) throw UsageError("images must be positive");
        for (long long b : batches) {
          if (b <= 0) throw UsageError("--batch must be positive");
          for (const auto& dev : o.devices) {
            const auto dev_inputs = dev == "cpu" ? std::vector<std::string>{"pageable"} : inputs;
            for (const auto& in : dev_inputs) {
              CaseId id{"train", "train", dev, "fp32", {}};
              id.with("model", m).with("batch", b).with("images", images);
              if (dev != "cpu") id.with("input", in).with("cuda_graph", graph);
              const bool quick = o.quick;
              cases.push_back({id, [=] { return make_training_case(m, dev, int(b), std::size_t(images), in, graph, false, quick); }});
            }
          }
        }
      }
    return cases;
  };
  return s;
}

}  // namespace dlb::bench
