// The region hook of `dlbench run --profile`: a trainer (or a model) calls begin/end around each
// part of one training step (data copy, each layer's forward and backward, loss, optimizer,
// synchronisation); a Profiler records them. Knows nothing of files or the harness: bench/ turns the
// regions into a Chrome trace and a per-layer table. A null Profiler* means "not profiling" and
// costs one branch per region.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlb::models {

// One finished region. Times in microseconds from the profiler's start; `depth` 0 is the step.
struct Region {
  std::string name;   // "forward conv1", "backward fc2", "loss", "optimizer", "data copy", "step"
  std::string cat;    // "step" | "forward" | "backward" | "loss" | "optimizer" | "copy" | "sync" | "phase"
  std::string layer;  // the layer's name for forward/backward regions ("conv1"), else ""
  int depth = 0;
  double start_us = 0, dur_us = 0;
  double flops = 0;   // napkin FLOPs of the region (0 when not a compute region)
  std::string algo;   // the kernel(s) that ran, as records name them ("fwd_col_avx512", "onednn_bf16"), or ""
  std::string clock;  // "wall" (steady_clock) or "cuda_event"
};

class Profiler {
 public:
  virtual ~Profiler() = default;
  virtual void begin(const std::string& name, const char* cat, const std::string& layer = "", double flops = 0) = 0;
  virtual void end() = 0;
  // Names the kernel(s) of the region begun last (Region::algo).
  virtual void set_algo(const std::string& algo) = 0;
  // A GPU profiler records its events on this stream (a cudaStream_t); the trainer binds it first.
  virtual void bind_stream(void* stream) { (void)stream; }
  // All regions in begin order, once every end() has been called (a GPU profiler waits for its events).
  virtual std::vector<Region> regions() = 0;
};

// CPU regions by wall clock (std::chrono::steady_clock).
class WallProfiler final : public Profiler {
 public:
  WallProfiler() : t0_(std::chrono::steady_clock::now()) {}
  void begin(const std::string& name, const char* cat, const std::string& layer, double flops) override;
  void end() override;
  void set_algo(const std::string& algo) override;
  std::vector<Region> regions() override { return done_; }

 private:
  double now_us() const;
  std::chrono::steady_clock::time_point t0_;
  std::vector<Region> done_;
  std::vector<std::size_t> open_;  // indices into done_ of the regions not yet ended
};

#ifdef DLB_HAVE_CUDA
// GPU regions by CUDA events on the bound stream (times from the first event), each also an NVTX
// range so nsys / ncu show our names; `label` (the case) is one NVTX range around the profiler's
// whole life. models/cuda/cuda_profiler.cpp (ran on an H100: the seq suite's --profile, 2026-11-27).
std::unique_ptr<Profiler> make_cuda_profiler(const std::string& label);
#endif

// begin() now, end() when the scope closes; does nothing when p is null.
class ProfileScope {
 public:
  ProfileScope(Profiler* p, const std::string& name, const char* cat, const std::string& layer = "", double flops = 0,
               const std::string& algo = "")
      : p_(p) {
    if (p_) p_->begin(name, cat, layer, flops);
    if (p_ && !algo.empty()) p_->set_algo(algo);
  }
  ~ProfileScope() {
    if (p_) p_->end();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* p_;
};

}  // namespace dlb::models
