// The run's context (see context.h).
#include "harness/run/context.h"

#include <unistd.h>

#include <iostream>
#include <new>
#include <system_error>

#include "harness/gpu_peaks.h"
#include "harness/resume.h"
#include "kernels/common/errors.h"
#include "kernels/common/gpu_probe.h"
#include "kernels/cpu/gemm.h"

namespace dlb::harness {

using json = nlohmann::json;

json run_header(const RunOptions& opts, const Plan& plan, const json& fp, std::uint64_t seed) {
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  return {{"format", 1},
          {"planned", plan.names},
          {"options", options_json(opts, plan.devices)},
          {"machine", machine_json(fp)},
          {"argv", opts.argv},
          {"host", host},
          {"pid", getpid()},
          {"seed", seed}};
}

Peaks measure_peaks(const Plan& plan, const json& stored, json& context) {
  Peaks peaks;
  bool cpu_cases = false, pool = false;
  for (const auto& [s, c] : plan.cases) {
    if (c.id.device != "cpu" || s->distributed) continue;  // across ranks: every core is a rank's
    cpu_cases = true;
    pool |= s->blas_from_pool;  // the training and conv kernels call OpenBLAS from every pool thread
  }
  if (cpu_cases && stored.is_object() && stored.contains("cpu_fp32_gflops")) {  // resume: measured already
    peaks.cpu_fp32_gflops = stored.value("cpu_fp32_gflops", 0.0);
    peaks.cpu_mem_gb_per_s = stored.value("cpu_mem_gb_per_s", 0.0);
    peaks.cpu_fma_isa = stored.value("cpu_fma_isa", "");
    peaks.threads = stored.value("threads", 0);
    peaks.measured = true;
    context["peaks"] = stored;
  } else if (cpu_cases) {
    const std::string no_room = cpu::openblas_reserve_buffers(pool);
    if (!no_room.empty()) throw UsageError("cannot run CPU cases: " + no_room);
    std::cerr << "dlbench: measuring CPU peaks (FMA, memory bandwidth)...\n";
    try {  // out of memory here (ulimit -v) marks the peaks unknown; the cases still run
      peaks = measure_cpu_peaks();
      context["peaks"] = {{"cpu_fp32_gflops", peaks.cpu_fp32_gflops},
                          {"cpu_mem_gb_per_s", peaks.cpu_mem_gb_per_s},
                          {"cpu_fma_isa", peaks.cpu_fma_isa},
                          {"threads", peaks.threads}};
    } catch (const std::exception& e) {
      const bool oom = dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const OutOfMemory*>(&e) ||
                       dynamic_cast<const std::system_error*>(&e);  // a thread that could not start
      peaks = Peaks{};
      context["peaks"] = {{"error", oom ? "out of memory" : e.what()}};
      std::cerr << "dlbench: CPU peaks not measured (" << (oom ? "out of memory" : e.what()) << "); no % of peak\n";
    }
  }
  // GPU ceilings: theoretical ones are in context.cuda.gpus; add what cuBLAS measures on each GPU used.
  for (const auto& d : plan.devices) {
    if (!bench::is_gpu(d)) continue;
    try {
      const auto m = measure_gpu_peaks(bench::gpu_index(d));
      context["peaks"]["gpus"][d] = {{"cublas_sgemm_gflops", m.cublas_sgemm_gflops},
                                     {"cublas_hgemm_tc_gflops", m.cublas_hgemm_tc_gflops},
                                     {"data", kGpuProbeData}};
    } catch (const std::exception& e) {
      context["peaks"]["gpus"][d] = {{"error", e.what()}};
    }
  }
  return peaks;
}

json run_section(const RunOptions& opts, const Plan& plan, const TimingPolicy& policy, const Ordering& ordering,
                 bool resuming) {
  json timing = {{"mode", ordering.shuffle ? "interleaved" : "back-to-back"},
                 {"tiny_min_time_s", policy.tiny_min_time},
                 {"tiny_below_s", policy.tiny_below_s}};
  if (ordering.shuffle) timing["seed"] = ordering.seed, timing["window"] = ordering.window;
  return {{"suites", opts.suites},
          {"devices", plan.devices},
          {"quick", opts.quick},
          {"repetitions", policy.repetitions},
          {"min_time_s", policy.min_time},
          {"filter", opts.filter},
          {"cases", plan.cases.size()},
          {"interrupted", false},
          {"timing", timing},
          {"planned", plan.names},
          {"state", "running"},
          {"resumed", resuming}};
}

}  // namespace dlb::harness
