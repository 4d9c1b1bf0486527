#include "bench/graph_check.h"

#include <string>

namespace dlb::bench {

CheckResult check_graph_steps(models::Trainer& graphed, models::Model& m, models::Trainer& eager, models::Model& twin,
                              int steps, const std::function<const models::Batch&(int)>& batch) {
  WorstError w;
  for (int k = 0; k < steps; ++k) {
    const models::Batch& b = batch(k);
    const float want = eager.train_batch(b);
    w.loss(graphed.train_batch(b), want);
  }
  eager.sync_to_host(), graphed.sync_to_host();
  const auto a = m.params(), e = twin.params();
  for (std::size_t i = 0; i < a.size(); ++i) {
    L2Error l2;
    l2.add(a[i]->value.data(), e[i]->value.data(), a[i]->size());
    w.add(l2.rel(), a[i]->name);
  }
  return judge(w.err, kGraphTolerance,
               std::to_string(steps) + " training steps replayed from a CUDA graph vs the same steps eager (losses, "
               "each weight tensor's relative L2)" + w.said());
}

}  // namespace dlb::bench
