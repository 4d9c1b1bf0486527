// See graph_cache.h.
#include "models/cuda/graph_cache.h"

#include "kernels/cuda/cuda_util.h"

namespace dlb::models {

void GraphCache::run(int key, cudaStream_t s, FirstCall first, const std::function<void()>& body) {
  if (auto it = execs_.find(key); it != execs_.end()) {
    DLB_CUDA_CHECK(cudaGraphLaunch(it->second, s));
    return;
  }
  body();  // the warm-up, outside the capture
  cudaGraph_t g = nullptr;
  DLB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(s, &g);  // ends the (invalidated) capture; the stream is usable again
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    throw;
  }
  DLB_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  DLB_CUDA_CHECK(e);
  execs_.emplace(key, exec);
  if (first == FirstCall::replayed) DLB_CUDA_CHECK(cudaGraphLaunch(exec, s));
}

void GraphCache::clear() {
  for (auto& [k, e] : execs_) cudaGraphExecDestroy(e);
  execs_.clear();
}

}  // namespace dlb::models
