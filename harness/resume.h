// --resume: the options a run's header stored, and the checks that a resumed run is the same run.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "harness/run/run.h"

namespace dlb::harness {

// The run's options from its header's "options", range-checked as the flags are. Throws InputError.
void apply_stored_options(RunOptions& o, const nlohmann::json& stored, const std::string& dir);
// What must match for a resumed run to be one run: the machine parts that change results.
nlohmann::json machine_json(const nlohmann::json& fingerprint);
// Throws UsageError naming the first key of `now` that differs from `stored` (`what`: "flags", ...).
void check_same(const nlohmann::json& stored, const nlohmann::json& now, const std::string& what,
                const std::string& dir);

}  // namespace dlb::harness
