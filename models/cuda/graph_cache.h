// CUDA graphs for the GPU trainers: a stream's work captured once per key (a batch size) and
// replayed. A replay is one launch for the whole step instead of one per kernel: at the seq suite's
// batch-1 sizes a GPU forward is ~80 launches of ~5-7 us of host time each against a few us of
// device time, so the graph is most of the difference there.
//
// The first call of a key runs the body eagerly (cuDNN's algorithm searches, cuBLAS's heuristics,
// workspaces that grow: none of that may happen inside a capture), then captures it. What the
// first call returns depends on the work: a training step's warm-up was that step
// (FirstCall::eager: the captured copy is not launched, or the step would run twice); a forward is
// idempotent, so it is launched once from the graph as well (FirstCall::replayed: the first
// call's result, the one a case verifies, is the graph's).
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <map>

namespace dlb::models {

class GraphCache {
 public:
  enum class FirstCall { eager, replayed };
  GraphCache() = default;
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() { clear(); }

  // Runs `body` on `s` for `key` as above. A body that calls what a capture forbids (a host sync,
  // an allocation, the legacy stream) throws, the capture ended and nothing kept.
  void run(int key, cudaStream_t s, FirstCall first, const std::function<void()>& body);
  // Drops every graph (their buffers were reallocated).
  void clear();

 private:
  std::map<int, cudaGraphExec_t> execs_;
};

}  // namespace dlb::models
