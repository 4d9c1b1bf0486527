// The contract between a case and the harness: a suite (bench/suite.h) expands its axes into cases;
// the harness sets each case up, verifies it once against its reference, and only then times it
// (harness/run/engine.h).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "bench/profile.h"

namespace dlb::bench {

using json = nlohmann::json;

// Identity of a case. Its results name is suite/op/device/dtype/key=value/..., and every part is
// also written as a plain key of the record (the axis names are the keys).
struct CaseId {
  std::string suite, op, device, dtype;                // device: "cpu" or "cuda:N"
  std::vector<std::pair<std::string, json>> params;    // sweep keys in order: size, m, n, k, batch, impl...
  std::string name() const;
  CaseId& with(std::string key, json value) {
    params.emplace_back(std::move(key), std::move(value));
    return *this;
  }
};

// Work of one timed iteration; the harness turns median time into throughput.
struct Work {
  double flops = 0;  // floating-point operations (FMA = 2)
  double bytes = 0;  // bytes moved (for bandwidth cases)
  double items = 0;  // images or tokens (for training and inference cases)
};

// The throughput key a case is judged by: gflops, gb_per_s, imgs_per_s or tokens_per_s (Work::items
// counts images or tokens).
enum class Metric { gflops, gb_per_s, imgs_per_s, tokens_per_s };

class Case {
 public:
  virtual ~Case() = default;
  // Allocate and fill inputs. Throw dlb::OutOfMemory when an allocation fails (recorded as
  // "out of memory", the sweep goes on) or dlb::Unsupported when this machine cannot run the case.
  virtual void setup() {}
  // Run once and compare with the reference. Never timed. A failed check is never timed.
  virtual CheckResult verify() = 0;
  // One timed iteration. With manual_time() return its seconds as measured on the device (CUDA
  // events); otherwise the harness times the wall clock and ignores the return value.
  virtual double run() = 0;
  virtual bool manual_time() const { return false; }
  // Back-to-back calls one run() makes (with manual_time(), run() returns their total seconds: GPU
  // cases time N calls per event pair, bench/gpu_timing.h). The harness reports per call: the
  // record's real_time and cpu_time are divided by it, iterations multiplied. Fixed after the first
  // run() (calibration), read after timing.
  virtual long calls_per_run() const { return 1; }
  // Fixed iterations per repetition (e.g. 1 for a whole epoch); 0 lets --min-time decide.
  virtual long iterations() const { return 0; }
  // Repetitions this case wants when the user gave no --repetitions (e.g. 1 for a 30 s epoch); 0: default.
  virtual int repetitions() const { return 0; }
  // True when the case's repetitions are not the harness's to multiply (an external peer's epochs,
  // as many as asked): no extra rounds when they vary.
  virtual bool fixed_repetitions() const { return false; }
  // CPU seconds used so far by a child process this case keeps running between repetitions (the
  // PyTorch peer): the harness counts them as the run's own, not as another process's load
  // ("foreign_cpu").
  virtual double child_cpu_seconds() const { return 0; }
  virtual Work work() const = 0;
  virtual Metric metric() const = 0;
  // Extra keys for the record after timing (chosen algorithm, peak_device_bytes, pct_of_peak when
  // the case knows its own ceiling, ...).
  virtual void annotate(json& record) const { (void)record; }
  // --profile (training suites): one extra, untimed step after timing, recorded region by region
  // and checked against an unprofiled step (bench/profile.h). False: nothing to profile here.
  virtual bool profile(ProfileResult& out) { (void)out; return false; }
  // Free big buffers before the next case is set up.
  virtual void teardown() {}
};

struct CaseSpec {
  CaseId id;
  std::function<std::unique_ptr<Case>()> make;
};

bool is_gpu(const std::string& device);
int gpu_index(const std::string& device);  // "cuda:1" -> 1

}  // namespace dlb::bench
