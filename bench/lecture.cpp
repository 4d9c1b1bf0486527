// Suite "lecture" (the default): the lecture's experiment. Net(hidden_num_chans=128) trained with
// CrossEntropy and SGD(lr 0.001, momentum 0.9) for one epoch of CIFAR-shaped images (axis "images";
// --images N overrides it) at batch 64, 4 and 2 on every device. A timed iteration is one epoch ->
// imgs/s. Before timing, one step's loss and gradients are checked: the CPU against the fp64
// reference path, a GPU against the CPU path from the same weights and batch (bench/training_cases.h).
// Axis "dtype" (--dtype, default fp32) trains a GPU under autocast (tf32, fp16 with loss scaling,
// bf16); the CPU trainer runs fp32 only (CPU bf16 autocast is measured by suite amp), so its other
// dtypes are recorded as skipped. --peer pytorch times PyTorch's epochs beside ours.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <ostream>

#include "bench/markdown.h"
#include "bench/suite.h"
#include "bench/training_cases.h"

namespace dlb::bench {

namespace {

struct Figure {
  const char* device;
  int batch;
  double imgs_per_s;
};
constexpr Figure kLecture[] = {{"CPU", 64, 1474}, {"GPU", 64, 5369}, {"CPU", 4, 1350},
                               {"GPU", 4, 1633},  {"CPU", 2, 860},   {"GPU", 2, 937}};

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f imgs/sec", v);
  return b;
}

void summarize_lecture(const std::vector<json>& records, std::ostream& out) {
  // (device label, batch) -> ours / peer
  std::map<std::pair<std::string, long long>, double> ours, peer;
  std::vector<long long> batches;
  std::vector<std::string> devices;
  for (const auto& r : records) {
    if (!r.contains("imgs_per_s") || !r.contains("batch")) continue;
    // A dtype other than fp32 gets its own rows: "cuda:0 bf16".
    const std::string dt = r.value("dtype", "fp32");
    const std::string dev = r.value("device", "") + (dt == "fp32" ? "" : " " + dt);
    const long long b = r.at("batch").get<long long>();
    auto& dst = r.value("impl", "ours") == "pytorch" ? peer : ours;
    dst[{dev, b}] = r.at("imgs_per_s").get<double>();
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
    if (std::find(devices.begin(), devices.end(), dev) == devices.end()) devices.push_back(dev);
  }
  out << "\n### The lecture's table: Net(hidden_num_chans=128), SGD(0.001, 0.9), one epoch\n\n";
  if (ours.empty()) {
    out << "(no lecture case finished)\n";
    return;
  }
  std::sort(batches.begin(), batches.end(), std::greater<long long>());
  std::sort(devices.begin(), devices.end(), [](const std::string& a, const std::string& b) {
    return (a == "cpu") != (b == "cpu") ? a == "cpu" : a < b;
  });
  const bool with_peer = !peer.empty();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"Device", "Batchsize", "Train throughput", "Lecture (desktop CPU / RTX 3080 Ti)"};
  if (with_peer) head.push_back("PyTorch here");
  rows.push_back(head);
  for (long long b : batches)
    for (const auto& dev : devices) {
      auto it = ours.find({dev, b});
      if (it == ours.end()) continue;
      std::string lec = "-";
      for (const auto& f : kLecture)
        if (f.batch == b && device_label(dev) == f.device) lec = fmt(f.imgs_per_s);
      std::vector<std::string> row{dev == "cpu" ? "CPU" : "GPU (" + dev + ")", std::to_string(b), fmt(it->second), lec};
      if (with_peer) {
        auto p = peer.find({dev, b});
        row.push_back(p == peer.end() ? "-" : fmt(p->second));
      }
      rows.push_back(row);
    }
  print_markdown(out, rows);
  // Smallest batch at which each GPU beats the CPU.
  bool any_gpu = false;
  for (const auto& dev : devices) {
    if (dev == "cpu") continue;
    any_gpu = true;
    long long smallest = -1;
    for (long long b : batches) {
      auto g = ours.find({dev, b}), c = ours.find({"cpu", b});
      if (g != ours.end() && c != ours.end() && g->second > c->second) smallest = b;
    }
    if (!ours.count({"cpu", batches.back()}) && !ours.count({"cpu", batches.front()}))
      out << "\n" << dev << ": no CPU figure in this run to compare with.\n";
    else if (smallest < 0)
      out << "\n" << dev << " does not beat the CPU at any batch measured here.\n";
    else
      out << "\nSmallest batch at which " << dev << " beats the CPU: " << smallest << " (the lecture's GPU won at every batch: 64, 4 and 2).\n";
  }
  if (!any_gpu) out << "\nNo GPU was measured in this run, so there is no GPU-vs-CPU crossover to report (the lecture's GPU column is shown for reference).\n";
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const bool with_peer = o.extra.value("peer", "") == "pytorch";
  for (long long images : axis_ints(o, "images"))
    for (long long b : axis_ints(o, "batch"))
      for (const auto& dev : o.devices) {
        add_training_cases(cases, "lecture", {{"model", "net128"}, {"impl", "ours"}}, dev, b, images, o, true);
        // As many epochs as our cases get, timed in the same interleaved rounds as ours.
        if (with_peer) add_peer_case(cases, "lecture", dev, b, images, o.repetitions > 0 ? o.repetitions : o.quick ? 2 : 1);
      }
  return cases;
}

}  // namespace

DLB_SUITE(lecture)
    .about("The lecture: Net(hidden_num_chans=128) training throughput, one epoch of CIFAR-shaped images (axis images; "
           "--images N sets it), batch 64, 4, 2 on every device; --input, --cuda-graph, --peer pytorch")
    .axis("batch", {64, 4, 2})
    .axis("images", {50000}, {1024})  // CIFAR-10's training set; --quick: 1024
    .axis("dtype", {"fp32"})          // GPU autocast: tf32, fp16, bf16
    .axis("input", {"pageable"})      // GPU input pipeline (the lecture's DataLoader: pageable)
    .takes({flag::batch(), flag::images(), flag::dtype(), flag::input(), flag::cuda_graph(), flag::peer(), flag::profile()})
    .cases(expand)
    .summary(summarize_lecture);

}  // namespace dlb::bench
