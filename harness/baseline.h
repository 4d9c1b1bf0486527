// Baselines per machine for `dlbench baseline save|check`: a results file kept per machine
// fingerprint (machine_key: CPU model, OpenBLAS version/core, GPU models, CUDA/cuBLAS/cuDNN versions;
// plus the logical core count and the OpenBLAS and kernel thread counts, since a 96-core run timed
// against a 2-core baseline is no regression check) in a folder the user chooses:
//
//   DIR/<slug of the key>/results.json   the saved run (as loaded: context + benchmarks)
//   DIR/<slug of the key>/key.txt        the machine key, one line (what matching reads)
//
// A check against a machine with no baseline is not a failure: it prints
// "no baseline for this machine: <key>" and exits 0 (a new CI runner stays green but says so),
// unless --require is given (exit 2) or --save-missing saves this run as the baseline.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dlb::harness {

// The machine key of a loaded run, then " | N cores | OpenBLAS T threads | K kernel threads" (each
// part only when the context has it); InputError naming `label` when it carries no fingerprint
// (a results.jsonl alone has no context).
std::string baseline_key(const nlohmann::json& doc, const std::string& label);

// For a key with no baseline in `dir`: the saved key that shares the most " | " parts with it, and
// what differs, e.g. "DIR/x has 2 cores, OpenBLAS 2 threads (this run: 96 cores, OpenBLAS 96
// threads)". "" when `dir` holds no baseline at all.
std::string nearest_baseline_difference(const std::string& dir, const std::string& key);

// Folder name for a key: lowercase letters, digits and '-', at most ~60 characters, plus 8 hex
// digits of the key's hash so that two keys never share a folder.
std::string baseline_slug(const std::string& key);

// Saves `doc` as the baseline for its machine; returns the folder. `replaced` receives a description
// of the baseline it replaced ("" when there was none). UsageError when DIR cannot be written.
std::string save_baseline(const nlohmann::json& doc, const std::string& key, const std::string& dir,
                          std::string* replaced = nullptr);

// The folder of the baseline saved for `key` in `dir`, if any: DIR/<slug>, else any DIR/* whose
// key.txt holds exactly `key`.
std::optional<std::string> find_baseline(const std::string& dir, const std::string& key);

}  // namespace dlb::harness
