// The machine fingerprint: what a number depends on (CPU, OpenBLAS, GPUs, CUDA libraries, git,
// argv, result-changing environment variables). Written into results.json's "context".
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::harness {

struct Peaks;

// Cheap facts only (no measurement).
nlohmann::json fingerprint(const std::vector<std::string>& argv = {});

// CPU facts used elsewhere (tables, peak choice).
std::string cpu_model();
std::vector<std::string> cpu_isa_flags();  // the interesting subset present on this CPU
bool cpu_has_flag(const std::string& flag);

// Human-readable rendering for `dlbench info`.
std::string fingerprint_text(const nlohmann::json& fp);

// The key a baseline is matched by: CPU model, GPU models, OpenBLAS core and library versions.
std::string machine_key(const nlohmann::json& fp);

}  // namespace dlb::harness
