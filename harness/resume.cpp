// What --resume reads back from a run's header and checks against this run (see resume.h).
#include "harness/resume.h"

#include <algorithm>
#include <cmath>

#include "harness/fingerprint.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

using json = nlohmann::json;

void apply_stored_options(RunOptions& o, const json& st, const std::string& dir) {
  try {
    o.suites = st.at("suites").get<std::vector<std::string>>();
    std::string dev;
    for (const auto& d : st.at("devices")) dev += (dev.empty() ? "" : ",") + d.get<std::string>();
    o.device = dev.empty() ? "cpu" : dev;
    o.quick = st.at("quick").get<bool>();
    // The same ranges as the flags (0: not given, the default applies): a header edited to 2e9
    // repetitions or a 1e9 s minimum time must not run for ever, nor -5 become 5.
    const json& reps = st.at("repetitions");
    const json& mt = st.at("min_time");
    const json& cv = st.at("max_cv");
    const std::string where = dir + "/results.jsonl: its run header's ";
    if (!reps.is_number_integer() || (reps.get<long long>() != 0 && (reps.get<long long>() < 1 || reps.get<long long>() > 1000)))
      throw InputError(where + "repetitions " + reps.dump() + " is not 1..1000 (as --repetitions)");
    if (!mt.is_number() || !std::isfinite(mt.get<double>()) || (mt.get<double>() != 0 && (mt.get<double>() < 1e-6 || mt.get<double>() > 3600.0)))
      throw InputError(where + "min_time " + mt.dump() + " is not 1e-6..3600 s (as --min-time)");
    if (!cv.is_number() || !std::isfinite(cv.get<double>()) || cv.get<double>() < 0 || cv.get<double>() > 10.0)
      throw InputError(where + "max_cv " + cv.dump() + " is not 0..10");
    o.repetitions = static_cast<int>(reps.get<long long>());
    o.min_time = mt.get<double>();
    o.max_cv = cv.get<double>();
    o.filter = st.at("filter").get<std::string>();
    o.overrides = st.at("overrides");
    o.extra = st.at("extra");
    o.interleave = st.value("interleave", true);
  } catch (const json::exception&) {
    throw InputError(dir + "/results.jsonl: its run header has no usable options; give the run's flags with --resume");
  }
}

// What must match for a resumed run to be one run: the machine parts that change results.
json machine_json(const json& fp) {
  return {{"key", machine_key(fp)},
          {"logical_cores", fp.at("cpu").value("logical_cores", 0)},
          {"kernel_threads", fp.at("cpu").value("kernel_threads", 0)},
          {"openblas_threads", fp.at("openblas").value("threads", 0)}};
}

void check_same(const json& stored, const json& now, const std::string& what, const std::string& dir) {
  if (!stored.is_object()) throw InputError(dir + "/results.jsonl: its run header has no " + what);
  std::vector<std::string> keys;  // the ones a user thinks of first, first
  for (const char* k : {"suites", "devices", "overrides", "extra", "filter", "quick", "repetitions", "min_time"})
    if (now.contains(k)) keys.push_back(k);
  for (const auto& [k, v] : now.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& k : keys) {
    const json& v = now.at(k);
    const json old = stored.contains(k) ? stored.at(k) : json();
    if (old != v)
      throw UsageError("--resume " + dir + ": different " + what + ": " + k + " was " + old.dump() + ", now " + v.dump() +
                       (what == "flags" ? " (give the same flags as that run, or none)" : ""));
  }
}

}  // namespace dlb::harness
