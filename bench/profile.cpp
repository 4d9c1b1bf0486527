// Chrome traces and per-layer summaries of profiled steps (see profile.h).
#include "bench/profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>

#include "kernels/common/verify.h"

namespace dlb::bench {

using json = nlohmann::json;

bool profile_trainer_step(models::Trainer& t, models::Model& m, const models::Dataset& d, int batch,
                          const std::string& device, const std::string& label, ProfileResult& out) {
  const int n = static_cast<int>(std::min<std::size_t>(std::size_t(batch), d.size()));
  const models::Batch b{d.images.data(), d.labels.data(), nullptr, n};
  const float ref_loss = t.gradients(b);
  std::vector<std::vector<float>> ref_grads;
  for (auto* p : m.params()) ref_grads.push_back(p->grad);
  std::unique_ptr<models::Profiler> prof;
#ifdef DLB_HAVE_CUDA
  if (device != "cpu") prof = models::make_cuda_profiler(label);
#endif
  (void)label;
  if (!prof) prof = std::make_unique<models::WallProfiler>();
  const float loss = t.profile_step(d, batch, *prof);
  out.regions = prof->regions();
  out.device = device;
  WorstError w;
  w.loss(loss, ref_loss);
  if (device == "cpu") {
    auto ps = m.params();
    for (std::size_t i = 0; i < ps.size(); ++i) w.add(max_rel_err(ps[i]->grad.data(), ref_grads[i].data(), ps[i]->size()), ps[i]->name);
  }
  out.max_rel_err = w.err;
  out.verified = std::isfinite(loss) && w.err <= (device == "cpu" ? 1e-5 : 1e-4);
  out.check = device == "cpu" ? "loss and gradients equal an unprofiled step's" : "loss equals an unprofiled step's";
  return true;
}

bool profile_token_step(models::Trainer& t, models::Model& m, const models::Batch& b, const std::string& device,
                        const std::string& label, ProfileResult& out) {
#ifndef DLB_HAVE_CUDA
  (void)t, (void)m, (void)b, (void)device, (void)label, (void)out;
  return false;  // a CPU-only build: no GPU case reaches here
#else
  const std::unique_ptr<models::Profiler> prof = models::make_cuda_profiler(label);
  const float want = t.gradients(b);
  std::vector<std::vector<float>> ref;
  for (auto* p : m.params()) ref.push_back(p->grad);
  const float got = t.profile_gradients(b, *prof);
  WorstError w;
  w.loss(got, want);
  const auto ps = m.params();
  for (std::size_t i = 0; i < ps.size(); ++i) w.add(max_rel_err(ps[i]->grad.data(), ref[i].data(), ps[i]->size()), ps[i]->name);
  out.regions = prof->regions();
  out.device = device;
  out.max_rel_err = w.err;
  out.verified = std::isfinite(got) && w.err <= 1e-5;
  out.check = "loss and gradients of the profiled step equal an unprofiled one's" + w.said();
  return true;
#endif
}

bool profile_cpu_step(models::Model& m, const std::function<double(models::Profiler*)>& gradients,
                      const std::function<void()>& update, ProfileResult& out) {
  const double want = gradients(nullptr);
  std::vector<std::vector<float>> ref;
  for (models::Param* q : m.params()) ref.push_back(q->grad);
  models::WallProfiler prof;
  double got = NAN;
  {
    models::ProfileScope step(&prof, "step", "step");
    got = gradients(&prof);
    if (update) {
      models::ProfileScope r(&prof, "optimizer", "optimizer");
      update();  // the optimizers leave the gradients as they are: compared below
    }
  }
  WorstError w;
  w.loss(got, want);
  const auto ps = m.params();
  for (std::size_t i = 0; i < ps.size(); ++i) w.add(max_rel_err(ps[i]->grad.data(), ref[i].data(), ps[i]->size()), ps[i]->name);
  out.max_rel_err = w.err;
  out.regions = prof.regions();
  out.device = "cpu";
  out.verified = std::isfinite(got) && out.max_rel_err <= 1e-5;
  out.check = "loss and gradients equal an unprofiled step's" + w.said();
  return true;
}

json chrome_trace(const std::string& case_name, const ProfileResult& p) {
  json ev = json::array();
  // Metadata: the process is the case, the thread the device's clock.
  ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", case_name}}}});
  const std::string clock = p.regions.empty() ? "wall" : p.regions.front().clock;
  ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 1},
                {"args", {{"name", p.device + (clock == "cuda_event" ? " (CUDA events)" : " (wall clock)")}}}});
  for (const auto& r : p.regions) {
    json args = {{"depth", r.depth}, {"clock", r.clock}};
    if (!r.layer.empty()) args["layer"] = r.layer;
    if (!r.algo.empty()) args["algo"] = r.algo;
    if (r.flops > 0) {
      args["flops"] = r.flops;
      if (r.dur_us > 0) args["gflops"] = r.flops / (r.dur_us * 1e-6) * 1e-9;
    }
    ev.push_back({{"ph", "X"}, {"name", r.name}, {"cat", r.cat}, {"pid", 1}, {"tid", 1}, {"ts", r.start_us},
                  {"dur", r.dur_us}, {"args", args}});
  }
  return {{"traceEvents", ev},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"case", case_name}, {"device", p.device}, {"verified", p.verified}, {"check", p.check}}}};
}

json profile_summary(const ProfileResult& p) {
  double step_us = 0;
  for (const auto& r : p.regions)
    if (r.depth == 0) step_us += r.dur_us;
  // Leaves: regions with no region inside them.
  std::vector<bool> leaf(p.regions.size(), true);
  for (std::size_t i = 0; i + 1 < p.regions.size(); ++i) leaf[i] = p.regions[i + 1].depth <= p.regions[i].depth;
  struct Row {
    std::string kind, fw_algo, bw_algo;
    double fw = 0, bw = 0, ms = 0, flops = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const auto& r = p.regions[i];
    if (!leaf[i] || r.depth == 0) continue;
    const std::string key = r.layer.empty() ? r.name : r.layer;
    if (!rows.count(key)) order.push_back(key);
    Row& row = rows[key];
    row.kind = r.layer.empty() ? r.cat : "layer";
    const double ms = r.dur_us * 1e-3;
    if (r.cat == "forward") row.fw += ms, row.fw_algo = r.algo;
    if (r.cat == "backward") row.bw += ms, row.bw_algo = r.algo;
    row.ms += ms;
    row.flops += r.flops;
  }
  json out = json::array();
  double sum = 0;
  auto pct = [&](double ms) { return step_us > 0 ? 100.0 * ms / (step_us * 1e-3) : 0.0; };
  for (const auto& k : order) {
    const Row& r = rows[k];
    json j = {{"region", k}, {"kind", r.kind}, {"ms", r.ms}, {"pct_of_step", pct(r.ms)}};
    if (r.kind == "layer") j["forward_ms"] = r.fw, j["backward_ms"] = r.bw;
    if (!r.fw_algo.empty()) j["forward_algo"] = r.fw_algo;  // the CPU kernels that ran (Region::algo)
    if (!r.bw_algo.empty()) j["backward_algo"] = r.bw_algo;
    if (r.flops > 0 && r.ms > 0) j["gflops"] = r.flops / (r.ms * 1e-3) * 1e-9, j["flops"] = r.flops;
    out.push_back(j);
    sum += r.ms;
  }
  const double rest = step_us * 1e-3 - sum;
  out.push_back({{"region", "unaccounted"}, {"kind", "other"}, {"ms", rest}, {"pct_of_step", pct(rest)}});
  return {{"step_ms", step_us * 1e-3},
          {"clock", p.regions.empty() ? "wall" : p.regions.front().clock},
          {"device", p.device},
          {"verified", p.verified},
          {"max_rel_err", p.max_rel_err},
          {"check", p.check},
          {"rows", out}};
}

json write_profile(const std::string& dir, const std::string& case_name, const ProfileResult& p) {
  const std::string tdir = dir + "/traces";
  if (::mkdir(tdir.c_str(), 0777) != 0 && errno != EEXIST)
    throw std::runtime_error(tdir + ": cannot create the traces folder (" + std::strerror(errno) + ")");
  std::string file = case_name;
  for (char& c : file)
    if (c == '/' || c == ' ' || c == ':') c = '_';
  const std::string rel = "traces/" + file + ".json", path = dir + "/" + rel, tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << chrome_trace(case_name, p).dump() << "\n";
    if (!f.flush()) throw std::runtime_error(tmp + ": cannot write the trace");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": cannot write the trace (" + std::strerror(errno) + ")");
  json s = profile_summary(p);
  s["trace"] = rel;
  return s;
}

void print_profile(std::ostream& out, const std::string& case_name, const json& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "profile %s: one step %.3f ms (%s)%s -> %s\n", case_name.c_str(),
                s.value("step_ms", 0.0), s.value("clock", "").c_str(), s.value("verified", false) ? "" : " NOT VERIFIED",
                s.value("trace", "").c_str());
  out << buf;
  std::snprintf(buf, sizeof buf, "  %-16s %10s %10s %10s %7s %9s  %s\n", "region", "fwd ms", "bwd ms", "ms", "% step",
                "GFLOP/s", "kernels (fwd / bwd)");
  out << buf;
  for (const auto& r : s.value("rows", json::array())) {
    auto num = [&](const char* k) {
      char b[32];
      if (!r.contains(k)) return std::string("-");
      std::snprintf(b, sizeof b, "%.3f", r[k].get<double>());
      return std::string(b);
    };
    const std::string fa = r.value("forward_algo", ""), ba = r.value("backward_algo", "");
    const std::string algos = fa.empty() && ba.empty() ? "" : (fa.empty() ? "-" : fa) + " / " + (ba.empty() ? "-" : ba);
    std::snprintf(buf, sizeof buf, "  %-16s %10s %10s %10.3f %6.1f%% %9s  %s\n", r.value("region", "").c_str(),
                  num("forward_ms").c_str(), num("backward_ms").c_str(), r.value("ms", 0.0),
                  r.value("pct_of_step", 0.0), r.contains("gflops") ? num("gflops").c_str() : "-", algos.c_str());
    out << buf;
  }
  out.flush();
}

}  // namespace dlb::bench
