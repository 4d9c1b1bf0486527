// `dlbench run --profile`: what a case's one extra, untimed step recorded (models/profiler.h regions)
// turned into (a) a Chrome Trace Event Format file, <results>/traces/<case>.json, which Perfetto and
// chrome://tracing open, and (b) a per-layer summary (ms, % of step, GFLOP/s) kept in the record under
// "profile" and printed after the case. Suites produce a ProfileResult in Case::profile(); the
// harness calls write_profile().
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/profiler.h"
#include "models/trainer.h"

namespace dlb::bench {

struct ProfileResult {
  std::vector<models::Region> regions;  // depth 0: the step
  std::string device;                   // "cpu", "cuda:0"
  bool verified = false;                // the profiled step matched an unprofiled one
  double max_rel_err = 0;
  std::string check;                    // what was compared
};

// The profile step of a training case (lecture, train, amp on a GPU): from the trainer's current
// weights on the first `batch` images of `d`, the unprofiled loss and gradients first
// (Trainer::gradients changes no weights), then Trainer::profile_step, whose loss (and on the CPU its
// gradients, left in the host model) must agree: 1e-5 relative on the CPU, 1e-4 on a GPU. GPU
// regions by CUDA events with NVTX ranges, the case as an NVTX range named `label`.
bool profile_trainer_step(models::Trainer& t, models::Model& m, const models::Dataset& d, int batch,
                          const std::string& device, const std::string& label, ProfileResult& out);

// The profile of a token model's step on a GPU (seq and gpt2 suites): the unprofiled gradients of
// batch `b` first, then Trainer::profile_gradients on the same batch, whose loss and every gradient
// must agree within 1e-5 relative (the same kernels on the same inputs; only atomics' order may differ).
bool profile_token_step(models::Trainer& t, models::Model& m, const models::Batch& b, const std::string& device,
                        const std::string& label, ProfileResult& out);

// The profile step of a CPU case that trains by gradients(prof) (zero-grad, forward, loss, backward
// of its next batch, regions reported to prof when not null) then update() (the optimizer; empty:
// none, the weights stay): the unprofiled gradients first, then one step region holding
// gradients(&wall clock) and update() as "optimizer", whose loss and every gradient of m must equal
// the unprofiled ones within 1e-5 relative (the same kernels on the same batch). The gpt2, amp and
// seq suites' CPU cases.
bool profile_cpu_step(models::Model& m, const std::function<double(models::Profiler*)>& gradients,
                      const std::function<void()>& update, ProfileResult& out);

// The Chrome trace of one case: complete ("X") events, one per region, on one thread per clock.
nlohmann::json chrome_trace(const std::string& case_name, const ProfileResult& p);

// The summary: {"step_ms", "clock", "verified", "max_rel_err", "rows": [{"region", "kind", "forward_ms",
// "backward_ms", "ms", "pct_of_step", "gflops"}]}; a row per layer (forward + backward), then one per
// other leaf region (data copy, zero_grad, loss, optimizer, sync), then "unaccounted" (step minus rows).
nlohmann::json profile_summary(const ProfileResult& p);

// Writes DIR/traces/<case name with '/' -> '_'>.json (atomically) and returns the summary with its
// "trace" path relative to DIR. Throws std::runtime_error when the file cannot be written.
nlohmann::json write_profile(const std::string& dir, const std::string& case_name, const ProfileResult& p);

// The per-layer table, for the terminal.
void print_profile(std::ostream& out, const std::string& case_name, const nlohmann::json& summary);

}  // namespace dlb::bench
