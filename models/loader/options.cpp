// Loader options as text (see loader.h): the form a suite axis or a --loader flag gives them in.
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "kernels/common/errors.h"
#include "models/loader/loader.h"

namespace dlb::models::loader {

namespace {

long long number(const std::string& key, const std::string& v, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || !end || *end || errno || x < lo || x > hi)
    throw UsageError("loader option " + key + "=" + v + ": expected a whole number from " + std::to_string(lo) + " to " +
                     std::to_string(hi));
  return x;
}

bool on_off(const std::string& key, const std::string& v) {
  if (v == "on" || v == "true" || v == "1") return true;
  if (v == "off" || v == "false" || v == "0") return false;
  throw UsageError("loader option " + key + "=" + v + ": expected on or off");
}

std::vector<std::pair<std::string, std::string>> pairs(const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("loader option '" + item + "': expected key=value (e.g. workers=2,pin=on)");
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

}  // namespace

LoaderOptions loader_preset(const std::string& name) {
  LoaderOptions o;
  if (name == "lecture") {  // seed 000: DataLoader(CIFAR10(transform=ToTensor+Normalize), shuffle=True, num_workers=2)
    o.workers = 2;
    o.mode = WorkerMode::process;
    o.decode = Decode::none;
    o.shuffle = true;
    o.batch = 64;
    return o;
  }
  throw UsageError("loader preset '" + name + "': expected lecture");
}

LoaderOptions parse_loader_options(const std::string& spec, LoaderOptions o) {
  const auto kv = pairs(spec);
  for (const auto& [k, v] : kv) {
    if (k == "preset") {
      const LoaderOptions p = loader_preset(v);
      const std::string dataset = o.dataset;
      o = p;
      if (!dataset.empty()) o.dataset = dataset;
    }
  }
  for (const auto& [k, v] : kv) {
    if (k == "preset") continue;
    else if (k == "dataset") o.dataset = v;
    else if (k == "split") {
      if (v != "train" && v != "test") throw UsageError("loader option split=" + v + ": expected train or test");
      o.split = v;
    } else if (k == "batch") o.batch = static_cast<int>(number(k, v, 1, 1 << 20));
    else if (k == "workers") o.workers = static_cast<int>(number(k, v, 0, 256));
    else if (k == "mode") o.mode = parse_worker_mode(v);
    else if (k == "pin") o.pin = on_off(k, v);
    else if (k == "prefetch") o.prefetch = static_cast<int>(number(k, v, 1, 64));
    else if (k == "decode") o.decode = parse_decode(v);
    else if (k == "augment") o.augment = parse_augment(v);
    else if (k == "shuffle") o.shuffle = on_off(k, v);
    else if (k == "drop_last") o.drop_last = on_off(k, v);
    else if (k == "seed") o.seed = static_cast<std::uint64_t>(number(k, v, 0, (1LL << 62)));
    else if (k == "limit") o.limit = static_cast<std::size_t>(number(k, v, 0, 1LL << 40));
    else
      throw UsageError("loader option '" + k +
                       "': unknown (expected preset, dataset, split, batch, workers, mode, pin, prefetch, decode, augment, "
                       "shuffle, drop_last, seed or limit)");
  }
  return o;
}

std::string describe_options(const LoaderOptions& o) {
  std::string s = "workers=" + std::to_string(o.workers) + ",mode=" + worker_mode_name(o.mode) + ",pin=" + (o.pin ? "on" : "off") +
                  ",prefetch=" + std::to_string(o.prefetch) + ",decode=" + decode_name(o.decode) + ",augment=" + augment_name(o.augment) +
                  ",batch=" + std::to_string(o.batch) + ",shuffle=" + (o.shuffle ? "on" : "off") + ",seed=" + std::to_string(o.seed);
  if (o.drop_last) s += ",drop_last=on";
  if (o.split != "train") s += ",split=" + o.split;
  if (o.limit) s += ",limit=" + std::to_string(o.limit);
  return s;
}

}  // namespace dlb::models::loader
