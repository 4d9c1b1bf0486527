// The peers (bench/peers/*.py --serve): which interpreter runs them, and one running peer process
// answering requests with JSON lines. Used by the lecture and train suites' PeerCase
// (bench/training_cases.cpp), the seq suite's (bench/seq.cpp) and the gpt2 suite's (PyTorch, llm.c).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/case.h"
#include "kernels/common/child.h"

namespace dlb::bench {

// bench/peers/<file> in the source tree (DLB_SOURCE_DIR overrides where that is).
std::string peer_script(const std::string& file);

// The interpreter for a peer: DLBENCH_PEER_PYTHON when set (that one, e.g. a venv with PyTorch 2.x
// from PyPI: README); otherwise, of the launcher's choice, Debian's and PATH's python3, the one whose
// torch is newest. Probed once per run; python "" with the reason in `why` when none imports torch.
struct PeerPython {
  std::string python, torch, why;
};
const PeerPython& peer_python();

// DLBENCH_PEER_THREADS=N -> {"--threads", "N"} (default: none, every core). UsageError when bad.
std::vector<std::string> peer_threads_args();

// Who a peer is: its name ("peer" on its records, the start of its messages) and whether its script
// needs torch (run by peer_python()) or the standard library only (DLBENCH_PYTHON, else python3:
// the llm.c peer drives a C program).
struct PeerRunner {
  std::string name = "pytorch";
  bool torch = true;
};

// A peer started with `args` after its script (and the thread flags), warmed up: its {"ready": true}
// line read. Unsupported (recorded as skipped) when no interpreter imports torch (a torch peer), the
// script is missing, or the peer ends instead of answering (exit 3: what it needs is unavailable).
class PeerChild {
 public:
  PeerChild(const std::string& script_file, std::vector<std::string> args, PeerRunner runner = {});
  // Sends `line`, returns the peer's next record holding `key` (other lines are passed over).
  nlohmann::json request(const std::string& line, const char* key);
  // peer, peer_python; a torch peer's torch_version, torch_threads and torch_math (a GPU's TF32 and
  // cuDNN settings); and the keys its ready line lists under "keys".
  void annotate(nlohmann::json& r) const;
  double cpu_seconds = 0;  // the peer's own CPU time so far (all its threads), from its last record
  nlohmann::json ready;    // its first record

 private:
  nlohmann::json next_record(const char* key);
  std::unique_ptr<LineChild> child_;
  std::string python_;
  PeerRunner runner_;
};

// A case whose timed calls are one request line each to a serving peer (op=infer of the seq and
// gpt2 suites): the peer times the call itself and answers {"latencies": [seconds]}; the case keeps
// them for p50 / p99 (manual time) and counts the peer's CPU time as its own. A subclass starts
// peer_ in setup and checks the peer in verify.
class PeerLatencyCase : public Case {
 public:
  explicit PeerLatencyCase(std::string request) : request_(std::move(request)) {}
  double run() override;
  bool manual_time() const override { return true; }
  double child_cpu_seconds() const override { return peer_ ? peer_->cpu_seconds : 0; }
  void annotate(nlohmann::json& r) const override;  // the peer's keys, p50_ms / p99_ms

 protected:
  std::unique_ptr<PeerChild> peer_;
  std::vector<double> lat_;

 private:
  std::string request_;
};

}  // namespace dlb::bench
