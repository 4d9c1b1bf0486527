// Device timing of short GPU calls (see gpu_timing.h).
#include "bench/gpu_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dlb::bench {

long calls_per_event_pair(double one_call_s, double target_s, long max_calls) {
  max_calls = std::max(1L, max_calls);
  if (!(one_call_s > 0) || !std::isfinite(one_call_s) || !(target_s > 0)) return 1;
  const double n = std::ceil(target_s / one_call_s);
  if (!(n < double(max_calls))) return max_calls;
  return std::max(1L, static_cast<long>(n));
}

void note_l2(nlohmann::json& r, double bytes, double l2_bytes) {
  r["working_set_bytes"] = bytes;
  if (!(l2_bytes > 0)) return;
  r["l2_bytes"] = l2_bytes;
  r["l2_resident"] = bytes <= l2_bytes;
}

#ifdef DLB_HAVE_CUDA
void GpuCallTimer::release() { ev_.reset(); }

double GpuCallTimer::pair(const std::function<void()>& enqueue, long n) {
  if (!ev_) ev_ = std::make_unique<cuda::EventTimer>();
  ev_->start();
  const auto h0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) enqueue();
  last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
  last_pair_s_ = ev_->stop_seconds();
  return last_pair_s_;
}

double GpuCallTimer::time(const std::function<void()>& enqueue) {
  DLB_CUDA_CHECK(cudaSetDevice(device_));
  if (n_ == 0) {
    // One call (dispatch included, so N errs low), then trial pairs until one lasts target_s: the
    // per-call time of a pair is the device's, once the queue runs ahead of the host.
    long n = calls_per_event_pair(pair(enqueue, 1), target_s_);
    for (int k = 0; k < 3; ++k) {
      const double s = pair(enqueue, n);
      if (s >= target_s_) break;
      n = std::max(n, calls_per_event_pair(s / double(n), target_s_));
    }
    n_ = n;
  }
  return pair(enqueue, n_);
}

void GpuCallTimer::annotate(nlohmann::json& r) const {
  r["timing_method"] = "events around back-to-back calls";
  r["calls_per_event_pair"] = calls();
  if (n_ > 0 && last_pair_s_ > 0) {
    const double host = last_enqueue_s_ / double(n_), dev = last_pair_s_ / double(n_);
    r["host_enqueue_us_per_call"] = host * 1e6;
    r["dispatch_bound"] = host >= 0.9 * dev;
  }
}

double device_l2_bytes(int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return double(v);
}
#endif

}  // namespace dlb::bench
