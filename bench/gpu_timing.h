// Device timing of short GPU calls, shared by every GPU case that times one library or kernel call
// (matmul, conv, amp). One call between two CUDA events also times the host's dispatch of it
// (3-8 us for a cuBLAS call, tens of us for cuDNN's legacy API), which can be longer than the
// kernel itself. So each event pair brackets N back-to-back calls, N chosen from a first timed call
// so that one pair lasts at least 1 ms, and the harness reports per call (Case::calls_per_run).
// Inputs are not rotated: a record says whether its working set fits in the device's L2
// (l2_resident), where repeated calls find their inputs on chip.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cuda_util.h"
#endif

namespace dlb::bench {

// Calls per event pair so that one pair of back-to-back calls lasts at least target_s, from the
// seconds of one call (clamped to [1, max_calls]; an unknown or non-positive time gives 1).
long calls_per_event_pair(double one_call_s, double target_s = 1e-3, long max_calls = 10000);

// Record keys for a working set of `bytes` on a device with `l2_bytes` of L2: working_set_bytes,
// l2_bytes, l2_resident (true when the whole working set fits, so repeated calls read it from L2).
void note_l2(nlohmann::json& r, double bytes, double l2_bytes);

#ifdef DLB_HAVE_CUDA
// Times `enqueue` (one call, enqueued on the default stream) N times back to back between two events
// on `device`. The first time() calibrates N (one call, then up to three trial pairs until a pair
// lasts >= target_s) and every later time() uses the same N, so all repetitions of a case measure the
// same thing. time() makes `device` current first (interleaved rounds run other cases, maybe on other
// devices, in between) and creates the events on first use, so they belong to that device.
class GpuCallTimer {
 public:
  explicit GpuCallTimer(int device, double target_s = 1e-3) : device_(device), target_s_(target_s) {}
  GpuCallTimer(const GpuCallTimer&) = delete;
  GpuCallTimer& operator=(const GpuCallTimer&) = delete;
  // Seconds of one pair of calls() back-to-back calls, measured on the device.
  double time(const std::function<void()>& enqueue);
  long calls() const { return n_ > 0 ? n_ : 1; }
  // Frees the events; calls() stays (the harness reads it after teardown of the device buffers).
  void release();
  // Record keys: timing_method, calls_per_event_pair, host_enqueue_us_per_call (host time to enqueue
  // one call, measured around the last pair's loop) and dispatch_bound (enqueueing a call took at
  // least 90% of its device time: the pair measured the host's dispatch rate, not the kernel).
  void annotate(nlohmann::json& r) const;

 private:
  double pair(const std::function<void()>& enqueue, long n);
  std::unique_ptr<cuda::EventTimer> ev_;
  int device_;
  double target_s_;
  long n_ = 0;
  double last_pair_s_ = 0, last_enqueue_s_ = 0;
};

// L2 size of a CUDA device in bytes (0 when it cannot be read).
double device_l2_bytes(int device);
#endif

}  // namespace dlb::bench
