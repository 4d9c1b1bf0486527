// The training cases the lecture and train suites share: one epoch of a seed model on one device
// (TrainingCase: ours, verified against the fp64 reference on the CPU and against the CPU on a GPU)
// and the PyTorch peer (PeerCase: bench/peers/pytorch_lecture.py, timed in the same rounds as ours).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/loader_cases.h"
#include "bench/peer.h"
#include "bench/suite.h"
#include "models/data.h"

namespace dlb::bench {

// Seeded synthetic data, shaped for the model: CIFAR-shaped 3x32x32, or 1- / 3-channel 28x28 crops
// of it for the MNIST-shaped models. Cached so the cases of one run share it.
std::shared_ptr<const models::Dataset> training_data(std::size_t images, int c, int h, int w);

// The loader that feeds a training case (--loader SPEC) instead of resident tensors: the spec as given
// (the records' fed_by) and its options. A spec without '=' names a preset ("lecture"). On a GPU the
// batches are pinned unless the spec says pin=off. Null without --loader; UsageError on a bad spec.
struct Feed {
  std::string by;
  ld::LoaderOptions o;
};
std::shared_ptr<const Feed> feed_of(const SuiteOptions& o, const std::string& device);

// "CPU" or "GPU": the lecture's device column.
std::string device_label(const std::string& device);

// The training cases of one model x batch x images on one device: one per GPU input pipeline (axis
// "input", "all" = the four) and dtype (axis "dtype"); `lead` holds the case's first keys (model,
// ...). `lecture`: print the lecture's progress lines. With --loader, also the same cases fed by the
// loader (key fed_by; the GPU's input axis does not apply to them: the feed is the loader's).
void add_training_cases(std::vector<CaseSpec>& cases, const std::string& suite,
                        std::vector<std::pair<std::string, json>> lead, const std::string& device, long long batch,
                        long long images, const SuiteOptions& o, bool lecture);

// The PyTorch peer's case of the lecture's point (model net128, impl=pytorch): as many epochs as ours
// get (`repetitions`). UsageError first when DLBENCH_PEER_THREADS is bad. With `feed`, PyTorch is fed
// by torchvision + its own DataLoader over the same files (workers, pin_memory), non_blocking copies.
void add_peer_case(std::vector<CaseSpec>& cases, const std::string& suite, const std::string& device, long long batch,
                   long long images, int repetitions, std::shared_ptr<const Feed> feed = nullptr);

// Any peer script of bench/peers/ run that way (--serve, one repetition per `request` line,
// each answered by a JSON line {"seconds", "loss", "cpu_seconds"}), timed in the same rounds as ours.
struct PeerSpec {
  std::string script;             // "pytorch_gpt2.py"
  PeerRunner runner;              // who runs it: PyTorch's interpreter by default
  std::vector<std::string> args;  // its flags (--serve and DLBENCH_PEER_THREADS's --threads are added)
  std::string request;            // the line that asks for one repetition: "epoch", "steps"
  Work work;                      // of one repetition
  Metric metric = Metric::imgs_per_s;
  json keys = json::object();     // added to its records
  std::function<void(PeerSpec&)> prepare;  // run first in setup(): write the files it reads, adjust args/work
  std::function<void()> cleanup;  // run in teardown() (remove them)
  // verify(), after one untimed repetition: the peer's output against a reference (the files it
  // wrote). Without it verify() asks only that the peer ran and its loss is finite.
  std::function<CheckResult()> check;
};
void add_peer(std::vector<CaseSpec>& cases, const CaseId& id, const PeerSpec& spec, int repetitions);
// The peer's repetitions when --peer pytorch was asked (--repetitions, else 2 quick, 5 full), 0 when
// not; checks DLBENCH_PEER_THREADS first, so a bad value is bad usage before any case runs.
int peer_repetitions(const SuiteOptions& o);

}  // namespace dlb::bench
