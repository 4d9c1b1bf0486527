// CudaProfiler (see models/profiler.h): a region is a pair of CUDA events on the trainer's stream
// and an NVTX push/pop (kernels/common/nvtx.h). Ran on an H100 (seq --profile, 2026-11-27).
#include <cuda_runtime.h>

#include <vector>

#include "kernels/common/nvtx.h"
#include "kernels/cuda/cuda_util.h"
#include "models/profiler.h"

namespace dlb::models {

namespace {

class CudaProfiler final : public Profiler {
 public:
  explicit CudaProfiler(const std::string& label) { nvtx_push(label); }
  ~CudaProfiler() override {
    nvtx_pop();
    for (auto& r : recs_) {
      cudaEventDestroy(r.start);
      cudaEventDestroy(r.stop);
    }
    if (t0_) cudaEventDestroy(t0_);
  }

  void bind_stream(void* s) override {
    stream_ = static_cast<cudaStream_t>(s);
    if (!t0_) {
      DLB_CUDA_CHECK(cudaEventCreate(&t0_));
      DLB_CUDA_CHECK(cudaEventRecord(t0_, stream_));
    }
  }

  void begin(const std::string& name, const char* cat, const std::string& layer, double flops) override {
    if (!t0_) bind_stream(nullptr);  // the default stream when the trainer bound none
    Rec r;
    r.region.name = name, r.region.cat = cat, r.region.layer = layer, r.region.flops = flops;
    r.region.clock = "cuda_event";
    r.region.depth = int(open_.size());
    DLB_CUDA_CHECK(cudaEventCreate(&r.start));
    DLB_CUDA_CHECK(cudaEventCreate(&r.stop));
    nvtx_push(name);
    DLB_CUDA_CHECK(cudaEventRecord(r.start, stream_));
    open_.push_back(recs_.size());
    recs_.push_back(r);
  }

  void set_algo(const std::string& algo) override {
    if (!open_.empty()) recs_[open_.back()].region.algo = algo;
  }

  void end() override {
    if (open_.empty()) return;
    Rec& r = recs_[open_.back()];
    open_.pop_back();
    DLB_CUDA_CHECK(cudaEventRecord(r.stop, stream_));
    nvtx_pop();
  }

  std::vector<Region> regions() override {
    std::vector<Region> out;
    if (recs_.empty()) return out;
    DLB_CUDA_CHECK(cudaEventSynchronize(recs_.front().stop));
    for (auto& r : recs_) {
      DLB_CUDA_CHECK(cudaEventSynchronize(r.stop));
      float a = 0, b = 0;
      DLB_CUDA_CHECK(cudaEventElapsedTime(&a, t0_, r.start));
      DLB_CUDA_CHECK(cudaEventElapsedTime(&b, r.start, r.stop));
      Region g = r.region;
      g.start_us = double(a) * 1e3;
      g.dur_us = double(b) * 1e3;
      out.push_back(g);
    }
    return out;
  }

 private:
  struct Rec {
    Region region;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  cudaStream_t stream_ = nullptr;
  cudaEvent_t t0_ = nullptr;
  std::vector<Rec> recs_;
  std::vector<std::size_t> open_;
};

}  // namespace

std::unique_ptr<Profiler> make_cuda_profiler(const std::string& label) { return std::make_unique<CudaProfiler>(label); }

}  // namespace dlb::models
