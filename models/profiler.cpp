// WallProfiler (see profiler.h).
#include "models/profiler.h"

namespace dlb::models {

double WallProfiler::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

void WallProfiler::begin(const std::string& name, const char* cat, const std::string& layer, double flops) {
  Region r;
  r.name = name, r.cat = cat, r.layer = layer, r.flops = flops, r.clock = "wall";
  r.depth = int(open_.size());
  r.start_us = now_us();
  open_.push_back(done_.size());
  done_.push_back(std::move(r));
}

void WallProfiler::set_algo(const std::string& algo) {
  if (!open_.empty()) done_[open_.back()].algo = algo;
}

void WallProfiler::end() {
  if (open_.empty()) return;
  Region& r = done_[open_.back()];
  open_.pop_back();
  r.dur_us = now_us() - r.start_us;
}

}  // namespace dlb::models
