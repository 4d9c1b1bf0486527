// The peers' processes (see peer.h).
#include "bench/peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "bench/latency.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace dlb::bench {

using json = nlohmann::json;

std::string peer_script(const std::string& file) {
  if (const char* root = std::getenv("DLB_SOURCE_DIR")) return std::string(root) + "/bench/peers/" + file;
  return std::string(DLB_SOURCE_DIR) + "/bench/peers/" + file;
}

namespace {
// "2.15.0+cpu" -> {2, 15, 0}, for comparing versions.
std::vector<int> version_key(const std::string& v) {
  std::vector<int> k;
  std::istringstream in(v);
  std::string part;
  while (std::getline(in, part, '.')) {
    if (part.empty() || !std::isdigit(static_cast<unsigned char>(part[0]))) break;
    k.push_back(std::atoi(part.c_str()));
  }
  return k;
}

std::string torch_version_of(const std::string& py) {
  const std::string cmd = "'" + py + "' -c 'import torch; print(torch.__version__)' 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[128] = {0};
  std::string v = fgets(buf, sizeof buf, f) ? buf : "";
  const int st = pclose(f);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? v : "";
}
}  // namespace

const PeerPython& peer_python() {
  static const PeerPython chosen = [] {
    PeerPython best;
    if (const char* p = std::getenv("DLBENCH_PEER_PYTHON"); p && *p) {
      best.python = p, best.torch = torch_version_of(p);
      if (best.torch.empty()) best.why = std::string("DLBENCH_PEER_PYTHON=") + p + " does not import torch";
      return best;
    }
    std::vector<std::string> candidates;
    if (const char* p = std::getenv("DLBENCH_PYTHON")) candidates.push_back(p);
    candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
    for (const auto& py : candidates) {
      const std::string v = torch_version_of(py);
      if (!v.empty() && (best.torch.empty() || version_key(v) > version_key(best.torch))) best.python = py, best.torch = v;
    }
    if (best.torch.empty()) best.why = "no python3 here imports torch (set DLBENCH_PEER_PYTHON, see README)";
    return best;
  }();
  return chosen;
}

// DLBENCH_PEER_THREADS: on a shared machine PyTorch's OpenMP team can collapse when another process
// holds a core; N = 1 measures it without.
std::vector<std::string> peer_threads_args() {
  const char* e = std::getenv("DLBENCH_PEER_THREADS");
  if (!e || !*e) return {};
  char* end = nullptr;
  const long n = std::strtol(e, &end, 10);
  if (*end || n < 1 || n > 1024) throw UsageError(std::string("DLBENCH_PEER_THREADS=") + e + ": expected a thread count 1..1024");
  return {"--threads", std::to_string(n)};
}

PeerChild::PeerChild(const std::string& script_file, std::vector<std::string> args, PeerRunner runner)
    : runner_(std::move(runner)) {
  const std::string script = peer_script(script_file), who = runner_.name + " peer";
  if (access(script.c_str(), R_OK) != 0) throw Unsupported(who + ": " + script + " not found");
  if (runner_.torch) {
    const PeerPython& py = peer_python();
    if (py.torch.empty()) throw Unsupported(who + " unavailable: " + py.why);
    python_ = py.python;
  } else {
    const char* p = std::getenv("DLBENCH_PYTHON");
    python_ = p && *p ? p : "python3";
  }
  args.insert(args.begin(), {python_, script});
  for (const auto& a : peer_threads_args()) args.push_back(a);
  try {
    child_ = std::make_unique<LineChild>(args);
  } catch (const std::runtime_error& e) {
    throw Unsupported(who + " failed: " + e.what());
  }
  ready = next_record("ready");
}

json PeerChild::request(const std::string& line, const char* key) {
  child_->send(line);  // a peer that has gone ends its output instead: next_record says why
  return next_record(key);
}

void PeerChild::annotate(json& r) const {
  r["peer"] = runner_.name;
  r["peer_python"] = python_;  // the interpreter that ran it (DLBENCH_PEER_PYTHON or the newest torch found)
  if (runner_.torch) {
    r["torch_version"] = ready.value("torch", "?");
    r["torch_threads"] = ready.value("threads", 0);
    // On a GPU: TF32 off for cuDNN and matmul, cudnn.benchmark on (the peer's math matches ours).
    if (ready.contains("math") && ready.at("math").is_object() && !ready.at("math").empty()) r["torch_math"] = ready.at("math");
  }
  // What the peer itself wants on its records (e.g. the attention peer's "sdpa_backend").
  if (ready.contains("keys") && ready.at("keys").is_object()) r.update(ready.at("keys"));
}

// The peer's next JSON line holding `key`. When it ends instead: Interrupted after a signal,
// Unsupported naming its first line (exit 3: torch does not import or has no such device; llm.c's
// checkout is missing or does not build) or failed.
json PeerChild::next_record(const char* key) {
  const std::string who = runner_.name + " peer";
  std::string line, first;
  while (child_->read_line(&line)) {
    if (!line.empty() && line[0] == '{') {
      json j;
      try {
        j = parse_json_bounded(line, who + " output");
      } catch (const InputError&) {  // nested too deep: not a record
      }
      if (j.is_object() && j.contains(key)) {
        if (j.contains("cpu_seconds") && j.at("cpu_seconds").is_number()) cpu_seconds = j.at("cpu_seconds").get<double>();
        return j;
      }
    }
    if (first.empty()) first = line;
  }
  const int st = child_->finish();  // its output is read to the end already
  if (interrupt_requested()) throw Interrupted(who + " interrupted");
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) throw Unsupported(who + " unavailable: " + first);
  throw Unsupported(who + " failed: " + first);
}

double PeerLatencyCase::run() {
  const json r = peer_->request(request_, "latencies");
  lat_.push_back(r.at("latencies").at(0).get<double>());
  return lat_.back();
}

void PeerLatencyCase::annotate(json& r) const {
  if (peer_) peer_->annotate(r);
  put_latency(r, lat_);
}

}  // namespace dlb::bench
