// Suite "dist": what data-parallel training costs past one process. Every rank of the MPI world runs
// every case together (the harness launches them, harness/dist.cpp); rank 0 writes the results.
//  - collectives (kernels/comm): all-reduce, all-gather, reduce-scatter, broadcast, out of place and
//    in place, sizes swept like nccl-tests; CPU buffers through MPI, GPU buffers through NCCL (one
//    rank per GPU). Inputs are small integers, so every float sum is exact in any order: the check
//    counts wrong elements, summed over ranks, and must find 0.
//  - ddp_step: one data-parallel training step of a seed model (net128, mlp) with a fixed per-rank
//    batch: no_sync, after_backward (bucketed all-reduce once backward is done) and overlap (DDP's
//    buckets, reverse parameter order, all-reduce started as each bucket's gradients are ready).
// Every timed iteration returns the slowest rank's time, so all ranks take the same timing decisions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "bench/suite.h"
#include "bench/markdown.h"
#include "kernels/comm/comm.h"
#include "kernels/common/device.h"
#include "models/net.h"

namespace dlb::bench {

namespace {
using comm::Op;

// The value rank r puts at element i: an integer in [-8, 8], so sums over any number of ranks are
// exact in fp32 whatever order the engine adds them in.
float input_value(int r, std::size_t i) {
  const std::uint64_t h = (std::uint64_t(i) * 2654435761u + std::uint64_t(r) * 40503u + 12345u) % 17u;
  return float(int(h) - 8);
}

class CollectiveCase : public Case {
 public:
  CollectiveCase(Op op, std::string device, std::size_t count, bool inplace, bool quick)
      : op_(op), device_(std::move(device)), count_(count), inplace_(inplace), quick_(quick) {}

  void setup() override {
    if (!comm::available()) throw Unsupported("dlbench was built without MPI");
    const auto& w = comm::world();
    // NCCL needs one GPU per rank ("Duplicate GPU detected" otherwise). Same verdict on every rank.
    if (device_ != "cpu" && comm::max_over_ranks(w.local_size > int(cuda_info().gpus.size()) ? 1.0 : 0.0) > 0)
      throw Unsupported(std::to_string(w.local_size) + " ranks on a host with " + std::to_string(cuda_info().gpus.size()) +
                        " GPU(s): NCCL needs one GPU per rank");
    coll_ = device_ == "cpu" ? comm::make_mpi_collective(op_, count_, inplace_)
                             : comm::make_nccl_collective(op_, count_, inplace_, comm::world().local_rank);
  }

  CheckResult verify() override {
    const auto& w = comm::world();
    const std::size_t per = count_ / std::size_t(w.size);
    std::vector<float> in(comm::input_count(op_, count_, w.size));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = input_value(w.rank, i);
    coll_->load(in);
    comm::barrier();
    coll_->run(1);
    const auto out = coll_->output();
    long long wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      float want = 0;
      switch (op_) {
        case Op::all_reduce:
          for (int r = 0; r < w.size; ++r) want += input_value(r, i);
          break;
        case Op::all_gather: want = input_value(int(i / per), i % per); break;
        case Op::reduce_scatter:
          for (int r = 0; r < w.size; ++r) want += input_value(r, std::size_t(w.rank) * per + i);
          break;
        case Op::broadcast: want = input_value(0, i); break;
      }
      wrong += out[i] != want;
    }
    wrong_ = comm::sum_over_ranks(wrong);
    CheckResult c;
    c.ok = wrong_ == 0;
    c.max_rel_err = double(wrong_) / double(std::max<std::size_t>(1, count_));  // fraction of wrong elements
    c.tolerance = 0;
    if (!c.ok) c.message = std::to_string(wrong_) + " wrong element(s) summed over " + std::to_string(w.size) + " ranks";
    return c;
  }

  double run() override {
    // Several collectives per timed iteration for small messages (the timer and the barrier cost more).
    const int inner = int(std::clamp<std::size_t>((std::size_t(16) << 20) / std::max<std::size_t>(bytes(), 1), 1, quick_ ? 4 : 50));
    comm::barrier();
    const double s = coll_->run(inner) / inner;
    return comm::max_over_ranks(s);
  }
  bool manual_time() const override { return true; }
  long iterations() const override { return quick_ ? 2 : 5; }
  int repetitions() const override { return quick_ ? 2 : 0; }
  Work work() const override {
    Work w;
    w.bytes = double(bytes()) * comm::busbw_factor(op_, comm::world().size);  // gb_per_s is busbw
    return w;
  }
  Metric metric() const override { return Metric::gb_per_s; }
  void annotate(json& e) const override {
    e["count"] = count_;
    e["wrong"] = wrong_;
    const bool timed = e.value("run_type", "") == "iteration" || e.value("aggregate_name", "") == "mean" ||
                       e.value("aggregate_name", "") == "median";
    if (!timed || e.value("error_occurred", false) || !(e.value("real_time", 0.0) > 0)) return;
    const double algbw = double(bytes()) / (e.at("real_time").get<double>() * 1e-6) * 1e-9;  // GB = 1e9
    e["algbw_gb_per_s"] = algbw;
    e["busbw_gb_per_s"] = algbw * comm::busbw_factor(op_, comm::world().size);
  }
  void teardown() override { coll_.reset(); }

 private:
  std::size_t bytes() const { return count_ * sizeof(float); }
  Op op_;
  std::string device_;
  std::size_t count_;
  bool inplace_, quick_;
  long long wrong_ = 0;
  std::unique_ptr<comm::Collective> coll_;
};

// ---- the data-parallel step ----

enum class Variant { no_sync, after_backward, overlap };

Variant parse_variant(const std::string& s) {
  if (s == "no_sync") return Variant::no_sync;
  if (s == "after_backward") return Variant::after_backward;
  if (s == "overlap") return Variant::overlap;
  throw UsageError("dist variant '" + s + "': unknown (expected no_sync, after_backward or overlap)");
}

// Synthetic, seeded global batch of `step`: every rank can make all of it (the parity reference trains
// on the whole), and rank r trains on its slice [r*batch, (r+1)*batch).
struct GlobalBatch {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  std::size_t per_image = 0;
  GlobalBatch(const models::Model& m, int images, int step) {
    per_image = m.input_shape(1).size();
    x.resize(per_image * std::size_t(images));
    fill_uniform(x.data(), x.size(), 1000u + std::uint64_t(step));
    const int classes = int(m.output_shape(1).size());
    for (int i = 0; i < images; ++i) y.push_back((i * 7 + step * 3) % classes);
  }
  models::Batch slice(int first, int n) const {
    models::Batch b;
    b.x = x.data() + per_image * std::size_t(first);
    b.labels = y.data() + first;
    b.n = n;
    return b;
  }
};

std::vector<float> flat_params(const models::Model& m) {
  std::vector<float> v;
  for (const models::Param* p : m.params()) v.insert(v.end(), p->value.begin(), p->value.end());
  return v;
}

void set_params(models::Model& m, const std::vector<float>& v) {
  std::size_t at = 0;
  for (models::Param* p : m.params()) {
    std::copy(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + p->size()), p->value.begin());
    at += p->size();
  }
}

class DdpCase : public Case {
 public:
  DdpCase(std::string model, int batch, Variant v, double bucket_mb, bool quick)
      : model_name_(std::move(model)), batch_(batch), variant_(v), bucket_mb_(bucket_mb), quick_(quick) {}

  void setup() override {
    if (!comm::available()) throw Unsupported("dlbench was built without MPI");
    model_ = models::make_model(model_name_);
    reset();
    // Buckets over the parameters in reverse order (the order backward makes their gradients): the
    // first closes at 1 MiB (or the cap, if smaller), the rest at the cap, as PyTorch's DDP does.
    const double cap = bucket_mb_ * double(1 << 20), first_cap = std::min(cap, double(1 << 20));
    auto ps = model_->params();
    std::reverse(ps.begin(), ps.end());
    buckets_.clear();
    double bytes = 0;
    for (models::Param* p : ps) {
      if (buckets_.empty() || bytes >= (buckets_.size() == 1 ? first_cap : cap)) {
        buckets_.emplace_back();
        bytes = 0;
      }
      buckets_.back().params.push_back(p);
      buckets_.back().size += p->size();
      bytes += double(p->size() * sizeof(float));
      bucket_of_[p] = buckets_.size() - 1;
    }
    for (auto& b : buckets_) b.flat.resize(b.size);
    const int n = comm::world().size;
    data_ = std::make_unique<GlobalBatch>(*model_, batch_ * n, 0);
  }

  CheckResult verify() override {
    const auto& w = comm::world();
    const int K = 3, n = w.size;
    reset();
    const auto p0 = flat_params(*model_);
    for (int s = 0; s < K; ++s) {
      GlobalBatch g(*model_, batch_ * n, s + 1);
      step(g.slice(w.rank * batch_, batch_));
    }
    const auto got = flat_params(*model_);
    // Every rank must hold bit-identical parameters (no_sync: each trained alone, so not compared).
    long long differ = 0;
    if (variant_ != Variant::no_sync) {
      auto root = got;
      comm::broadcast_bytes(root.data(), root.size() * sizeof(float), 0);
      for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &root[i], sizeof(float)) != 0;
      differ = comm::sum_over_ranks(differ);
    }
    // Reference: one process training on the whole global batch (no_sync: on this rank's slice).
    auto ref = models::make_model(model_name_);
    ref->init(kSeed);
    models::Optimizer opt(models::default_optimizer(model_name_), ref->params());
    for (int s = 0; s < K; ++s) {
      GlobalBatch g(*ref, batch_ * n, s + 1);
      models::train_step(*ref, opt, variant_ == Variant::no_sync ? g.slice(w.rank * batch_, batch_) : g.slice(0, batch_ * n));
    }
    const auto want = flat_params(*ref);
    // Error of the parameter change, per tensor: |delta_ddp - delta_ref|_2 / |delta_ref|_2. The sum
    // order differs between one big batch and N small ones, so this is a tolerance, not bit equality
    // (an L2 norm: Adam's first steps move a near-zero gradient by +-lr whatever its rounding).
    double err = 0;
    std::size_t at = 0;
    for (const models::Param* p : ref->params()) {
      double num = 0, den = 0;
      for (std::size_t i = at; i < at + p->size(); ++i) {
        const double d = double(got[i]) - double(want[i]), r = double(want[i]) - double(p0[i]);
        num += d * d;
        den += r * r;
      }
      if (den > 0) err = std::max(err, std::sqrt(num / den));
      at += p->size();
    }
    err = comm::max_over_ranks(err);
    measure_single_rank();
    if (variant_ == Variant::overlap) interleave_with_after_backward();
    reset();
    CheckResult c = judge(err, kTolerance, "parameters after " + std::to_string(K) + " steps vs one rank on the global batch");
    if (differ) {
      c.ok = false;
      c.message = std::to_string(differ) + " parameter(s) differ between ranks after " + std::to_string(K) + " steps";
    }
    return c;
  }

  double run() override {
    const auto b = data_->slice(comm::world().rank * batch_, batch_);
    comm::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    step(b);
    const double s = comm::max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    times_.push_back(s);
    return s;
  }
  bool manual_time() const override { return true; }
  long iterations() const override { return quick_ ? 4 : 20; }
  int repetitions() const override { return quick_ ? 2 : 0; }
  Work work() const override {
    Work w;
    w.items = double(batch_) * comm::world().size;  // global images per step
    w.flops = model_ ? model_->train_flops(batch_) * comm::world().size : 0;
    return w;
  }
  Metric metric() const override { return Metric::imgs_per_s; }
  void annotate(json& e) const override {
    std::vector<std::size_t> sizes;
    for (const auto& b : buckets_) sizes.push_back(b.size);
    e["bucket_elements"] = sizes;  // the layout, first bucket first
    if (e.value("error_occurred", false) || !e.contains("imgs_per_s")) return;
    e["single_rank_imgs_per_s"] = single_rank_ips_;
    if (single_rank_ips_ > 0) e["efficiency"] = e.at("imgs_per_s").get<double>() / (comm::world().size * single_rank_ips_);
    auto t = times_;
    std::sort(t.begin(), t.end());
    auto pct = [&](double q) { return t.empty() ? 0.0 : t[std::min(t.size() - 1, std::size_t(std::ceil(q * double(t.size()))) - (q > 0))] * 1e3; };
    e["p50_ms"] = pct(0.50);
    e["p90_ms"] = pct(0.90);
    e["p95_ms"] = pct(0.95);
    if (interleaved_ms_[1] > 0) {  // overlap: alternating steps with after_backward, in the same window
      e["interleaved_after_backward_p50_ms"] = interleaved_ms_[0];
      e["interleaved_overlap_p50_ms"] = interleaved_ms_[1];
      e["overlap_speedup"] = interleaved_ms_[0] / interleaved_ms_[1];
    }
  }
  void teardown() override {
    data_.reset();
    opt_.reset();
    model_.reset();
  }

 private:
  static constexpr std::uint64_t kSeed = 1;
  static constexpr double kTolerance = 1e-3;

  struct Bucket {
    std::vector<models::Param*> params;
    std::size_t size = 0;
    std::vector<float> flat;
    std::size_t waiting = 0;  // gradients not yet ready this step
    std::unique_ptr<comm::Pending> req;
  };

  // Fresh weights (rank 0's, broadcast: DDP's start) and optimizer state.
  void reset() {
    model_->init(kSeed);
    auto v = flat_params(*model_);
    comm::broadcast_bytes(v.data(), v.size() * sizeof(float), 0);
    set_params(*model_, v);
    opt_ = std::make_unique<models::Optimizer>(models::default_optimizer(model_name_), model_->params());
  }

  void launch(std::size_t k) {
    Bucket& b = buckets_[k];
    std::size_t at = 0;
    for (const models::Param* p : b.params) {
      std::copy(p->grad.begin(), p->grad.end(), b.flat.begin() + std::ptrdiff_t(at));
      at += p->size();
    }
    b.req = comm::iallreduce_sum(b.flat.data(), b.size);
  }

  // One training step on this rank's batch with the variant's gradient synchronisation.
  void step(const models::Batch& b) {
    model_->zero_grad();
    for (auto& bk : buckets_) bk.waiting = bk.params.size();
    std::size_t next = 0;  // buckets are launched strictly in index order on every rank
    if (variant_ == Variant::overlap) {
      model_->forward_backward(b, [&](const std::vector<models::Param*>& ready) {
        for (models::Param* p : ready) --buckets_[bucket_of_.at(p)].waiting;
        while (next < buckets_.size() && buckets_[next].waiting == 0) launch(next++);
        for (std::size_t k = 0; k < next; ++k) buckets_[k].req->test();  // progress for MPI's non-blocking schedule
      });
    } else {
      model_->forward_backward(b);
    }
    if (variant_ != Variant::no_sync) {
      while (next < buckets_.size()) launch(next++);
      const float inv = 1.0f / float(comm::world().size);
      for (auto& bk : buckets_) {
        bk.req->wait();
        bk.req.reset();
        std::size_t at = 0;
        for (models::Param* p : bk.params) {
          for (std::size_t i = 0; i < p->size(); ++i) p->grad[i] = bk.flat[at + i] * inv;  // SUM, then / world size
          at += p->size();
        }
      }
    }
    opt_->step();
  }

  // The overlap variant against after_backward, side by side: alternating steps of the two (same
  // buckets, same data), so load that drifts over a run weighs on both alike. Median step times.
  void interleave_with_after_backward() {
    const auto b = data_->slice(comm::world().rank * batch_, batch_);
    std::vector<double> t[2];
    const Variant mine = variant_;
    const int pairs = quick_ ? 4 : 20;
    for (int i = 0; i < pairs + 1; ++i)
      for (int k = 0; k < 2; ++k) {
        variant_ = k == 0 ? Variant::after_backward : Variant::overlap;
        comm::barrier();
        const auto t0 = std::chrono::steady_clock::now();
        step(b);
        const double s = comm::max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (i > 0) t[k].push_back(s);  // the first pair warms up
      }
    variant_ = mine;
    for (auto& v : t) std::sort(v.begin(), v.end());
    interleaved_ms_[0] = t[0][t[0].size() / 2] * 1e3;
    interleaved_ms_[1] = t[1][t[1].size() / 2] * 1e3;
  }

  // Images/s of one rank training alone (the others wait asleep), this case's own: the denominator
  // of its scaling efficiency throughput(N) / (N x throughput(1)).
  void measure_single_rank() {
    double ips = 0;
    comm::barrier_idle();
    if (comm::world().rank == 0) {
      auto m = models::make_model(model_name_);
      m->init(kSeed);
      models::Optimizer opt(models::default_optimizer(model_name_), m->params());
      const auto b = data_->slice(0, batch_);
      models::train_step(*m, opt, b);  // warm-up
      const int steps = quick_ ? 4 : 20;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) models::train_step(*m, opt, b);
      ips = double(steps) * batch_ / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    comm::barrier_idle();  // the others sleep meanwhile
    comm::broadcast_bytes(&ips, sizeof ips, 0);
    single_rank_ips_ = ips;
  }

  std::string model_name_;
  int batch_;
  Variant variant_;
  double bucket_mb_;
  bool quick_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Optimizer> opt_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const models::Param*, std::size_t> bucket_of_;
  std::unique_ptr<GlobalBatch> data_;
  std::vector<double> times_;
  double interleaved_ms_[2] = {0, 0};  // after_backward, overlap (overlap cases only)
  double single_rank_ips_ = 0;
};

std::string fmt(double v, const char* f = "%.3g") {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// nccl-tests' layout per collective (out of place and in place side by side), then the scaling table.
void summarize_dist(const std::vector<json>& records, std::ostream& out) {
  std::map<std::string, std::vector<std::vector<std::string>>> by_op;
  std::vector<std::vector<std::string>> ddp = {{"model", "ranks", "batch/rank", "variant", "bucket MiB", "imgs/s", "efficiency", "p50 ms",
                                                "p90 ms", "p95 ms", "overlap speedup", "verified"}};
  // (op, device, bytes) -> row with out-of-place then in-place columns
  std::map<std::tuple<std::string, std::string, long long>, std::vector<std::string>> rows;
  for (const auto& r : records) {
    const std::string op = r.value("op", "");
    const bool ok = !r.value("error_occurred", false);
    if (op == "ddp_step") {
      ddp.push_back({r.value("model", ""), std::to_string(r.value("ranks", 0)), std::to_string(r.value("batch", 0)), r.value("variant", ""),
                     fmt(r.value("bucket_mb", 0.0)), ok ? fmt(r.value("imgs_per_s", 0.0), "%.0f") : "-",
                     ok && r.contains("efficiency") ? fmt(r.at("efficiency").get<double>(), "%.2f") : "-",
                     ok ? fmt(r.value("p50_ms", 0.0)) : "-", ok ? fmt(r.value("p90_ms", 0.0)) : "-", ok ? fmt(r.value("p95_ms", 0.0)) : "-",
                     r.contains("overlap_speedup") ? fmt(r.at("overlap_speedup").get<double>(), "%.3f") : "-",
                     r.value("verified", false) ? "yes" : "NO"});
      continue;
    }
    if (!r.contains("bytes")) continue;
    auto& row = rows[{op + " " + r.value("device", "") + " ranks=" + std::to_string(r.value("ranks", 0)), "", r.at("bytes").get<long long>()}];
    if (row.empty()) row = {std::to_string(r.at("bytes").get<long long>()), std::to_string(r.value("count", 0LL)), "float", "sum", "-", "-", "-", "-", "-", "-", "-", "-"};
    const std::size_t at = r.value("inplace", 0) ? 8 : 4;
    row[at] = ok ? fmt(r.value("real_time", 0.0), "%.4g") : "-";
    row[at + 1] = ok ? fmt(r.value("algbw_gb_per_s", 0.0), "%.3f") : "-";
    row[at + 2] = ok ? fmt(r.value("busbw_gb_per_s", 0.0), "%.3f") : "-";
    row[at + 3] = r.contains("wrong") ? std::to_string(r.at("wrong").get<long long>()) : "N/A";
    if (op == "broadcast" || op == "all_gather") row[3] = "none";
  }
  for (const auto& [key, row] : rows) by_op[std::get<0>(key)].push_back(row);
  for (auto& [op, body] : by_op) {
    out << "\n### " << op << " (time us, algbw and busbw GB/s; out of place | in place)\n\n";
    body.insert(body.begin(), {"size (B)", "count", "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"});
    print_markdown(out, body, true);
  }
  if (ddp.size() > 1) {
    out << "\n### Data-parallel step (weak scaling; efficiency = imgs/s(N) / (N x imgs/s of one rank alone);\n"
        << "overlap speedup = after_backward / overlap median step time, alternating steps in one window)\n\n";
    print_markdown(out, ddp, true);
  }
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const auto dtypes = axis_strings(o, "dtype");
  if (std::find(dtypes.begin(), dtypes.end(), "fp32") == dtypes.end()) return cases;
  const int n = comm::world().size;
  std::vector<std::string> devices;
  for (const auto& d : o.devices) {
    const std::string dev = is_gpu(d) ? "cuda" : "cpu";
    if (std::find(devices.begin(), devices.end(), dev) == devices.end()) devices.push_back(dev);
  }
    for (const auto& dev : devices)
    for (const auto& opname : axis_strings(o, "op")) {
      const Op op = comm::parse_op(opname);
      std::vector<std::size_t> seen;
      for (long long req : axis_ints(o, "size")) {
        // nccl-tests: count = bytes / 4; all-gather and reduce-scatter round it down to a multiple of
        // the ranks. The record's bytes are what actually moved.
        std::size_t count = std::size_t(req) / sizeof(float);
        if (op == Op::all_gather || op == Op::reduce_scatter) count -= count % std::size_t(n);
        if (count == 0 || std::find(seen.begin(), seen.end(), count) != seen.end()) continue;
        seen.push_back(count);
        for (long long inplace : axis_ints(o, "inplace")) {
          CaseId id{"dist", opname, dev, "fp32", {}};
          id.with("ranks", n).with("bytes", count * sizeof(float)).with("inplace", inplace ? 1 : 0);
          const bool quick = o.quick;
          cases.push_back({id, [=] { return std::make_unique<CollectiveCase>(op, dev, count, inplace != 0, quick); }});
        }
      }
    }
    if (std::find(devices.begin(), devices.end(), "cpu") == devices.end()) return cases;  // the step runs on CPU ranks
  std::vector<double> buckets;
  for (const auto& v : o.axes.at("bucket_mb"))
    buckets.push_back(v.is_number() ? v.get<double>() : std::stod(v.get<std::string>()));
  for (const auto& m : axis_strings(o, "model")) {
    models::make_model(m);  // UsageError on an unknown model
    for (long long b : axis_ints(o, "batch"))
      for (const auto& vname : axis_strings(o, "variant")) {
        const Variant v = parse_variant(vname);
        for (double mb : v == Variant::no_sync ? std::vector<double>{0} : buckets) {
          CaseId id{"dist", "ddp_step", "cpu", "fp32", {}};
          id.with("model", m).with("ranks", n).with("batch", b).with("variant", vname);
          id.with("bucket_mb", mb == std::floor(mb) ? json(static_cast<long long>(mb)) : json(mb));
          const bool quick = o.quick;
          const int batch = int(b);
          cases.push_back({id, [=] { return std::make_unique<DdpCase>(m, batch, v, mb, quick); }});
        }
      }
  }
  return cases;
}

}  // namespace

DLB_SUITE(dist)
    .about("Across ranks (MPI / NCCL): all-reduce, all-gather, reduce-scatter, broadcast; data-parallel training step (--ranks N)")
    .axis("op", {"all_reduce", "all_gather", "reduce_scatter", "broadcast"})
    .axis("size", {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304, 16777216, 67108864}, {8, 12, 4100, 1048576})  // bytes
    .axis("inplace", {0, 1})
    .axis("model", {"net128", "mlp"})  // ddp_step
    .axis("batch", {32}, {8})          // per rank
    .axis("variant", {"no_sync", "after_backward", "overlap"})
    .axis("bucket_mb", {25, 0.1}, {0.1})
    .axis("dtype", {"fp32"})
    .takes({flag::size_sweep(), flag::batch(), flag::dtype()})
    .across_ranks()
    .cases(expand)
    .summary(summarize_dist);

}  // namespace dlb::bench
