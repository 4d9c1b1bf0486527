// A run's context: the machine fingerprint, the measured ceilings (CPU FMA and memory bandwidth
// probes, cuBLAS on each GPU used) and context.run (what was asked, how it is timed, its state).
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/records.h"
#include "harness/run/plan.h"

namespace dlb::harness {

// The results.jsonl header of a new run: planned cases, options, machine, argv, host, pid, seed.
nlohmann::json run_header(const RunOptions& opts, const Plan& plan, const nlohmann::json& fingerprint, std::uint64_t seed);

// The ceilings for % of peak, written into context["peaks"]: a resumed run's stored CPU peaks, else
// measured when the plan has CPU cases (not for a suite across ranks: every core is a rank's); the
// OpenBLAS buffers the CPU cases need are reserved first (UsageError when they cannot be).
Peaks measure_peaks(const Plan& plan, const nlohmann::json& stored_peaks, nlohmann::json& context);

// context["run"] at the start of a run.
nlohmann::json run_section(const RunOptions& opts, const Plan& plan, const TimingPolicy& policy, const Ordering& ordering,
                           bool resuming);

}  // namespace dlb::harness
