// The parity check (see seq_parity.h): the bundle written, ours run, the peer run, both compared.
#include "bench/seq_parity.h"

#include "bench/peer.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"
#include "kernels/common/verify.h"
#include "models/net.h"

namespace dlb::bench {

namespace {
void make_dir(const std::string& d) {
  if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error("cannot make " + d);
}
template <class T>
void write_raw(const std::string& path, const T* p, std::size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(p), std::streamsize(n * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}
std::vector<float> read_floats(const std::string& path, std::size_t n) {
  const std::string b = read_file_safely(path, n * sizeof(float) + 1);
  if (b.size() != n * sizeof(float))
    throw std::runtime_error(path + ": " + std::to_string(b.size()) + " bytes, expected " + std::to_string(n * 4));
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
}  // namespace

double SeqParity::loss_rel(std::size_t k) const { return std::abs(ours.at(k) - theirs.at(k)) / std::abs(theirs.at(k)); }
double SeqParity::loss_rel_exact(std::size_t k, bool torch32) const {
  return std::abs((torch32 ? theirs : ours).at(k) - exact.at(k)) / std::abs(exact.at(k));
}

SeqParity seq_parity(models::SeqConfig c, int n, int steps, const std::string& python, const std::string& dir) {
  using namespace models;
  c.dropout = 0;
  auto m = make_seq_model(c);
  m->init(42);
  make_dir(dir);
  make_dir(dir + "/params");
  nlohmann::json cfg = {{"model", c.model}, {"vocab", c.vocab}, {"seq", c.seq}, {"emb", c.emb},
                        {"hidden", c.hidden}, {"layers", c.layers}, {"classes", c.classes},
                        {"d_model", c.d_model}, {"heads", c.heads}, {"causal", c.causal},
                        {"lr", 1e-3}, {"steps", steps}, {"batch", n}, {"grad_steps", {1, steps}}};
  for (Param* p : m->params()) write_raw(dir + "/params/" + p->name + ".f32", p->value.data(), p->size());
  write_file_atomically(dir + "/config.json", cfg.dump(1));

  // the batches: windows of the synthetic data, step k taking samples [k n, (k + 1) n)
  SeqConfig cc = c;
  const TokenData d = seq_data(cc, "synthetic", std::size_t(steps) * n, 5);
  std::vector<std::uint32_t> idx(d.size());
  std::iota(idx.begin(), idx.end(), 0u);
  SeqBatcher batcher(c);
  OptimizerConfig oc;
  oc.kind = "adam", oc.lr = 1e-3f;
  Optimizer opt(oc, m->params());
  SeqParity r;
  std::vector<std::vector<std::vector<float>>> grads;  // per checked step, per parameter
  const int inputs = c.model == "transformer" ? 2 : 1;
  for (int k = 1; k <= steps; ++k) {
    const Batch& b = batcher.gather(d, idx, std::size_t(k - 1) * n, n);
    const std::string sd = dir + "/step_" + std::to_string(k);
    make_dir(sd);
    for (int i = 0; i < inputs; ++i)
      write_raw(sd + "/in_" + std::to_string(i) + ".i32", static_cast<const std::int32_t*>(b.inputs[i]),
                std::size_t(n) * c.seq);
    write_raw(sd + "/labels.i32", b.labels, std::size_t(n) * c.labels_per_sample());
    m->set_step(true, std::uint64_t(k));
    m->zero_grad();
    r.ours.push_back(m->forward_backward(b));
    if (k == 1 || k == steps) {  // kept, and written beside the peer's for inspection
      grads.emplace_back();
      make_dir(dir + "/ours_grads_" + std::to_string(k));
      for (Param* p : m->params()) {
        grads.back().push_back(p->grad);
        write_raw(dir + "/ours_grads_" + std::to_string(k) + "/" + p->name + ".f32", p->grad.data(), p->size());
      }
    }
    opt.step();
  }

  std::string out;
  const int st = run_child({python, peer_script("pytorch_seq.py"), "--parity", dir}, {}, {}, &out);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string first = out.substr(0, out.find('\n'));
  if (st < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 3)) throw Unsupported("pytorch peer unavailable: " + first);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) throw std::runtime_error("pytorch peer failed: " + out.substr(out.rfind('\n') + 1));
  const auto j = parse_json_bounded(read_file_safely(dir + "/torch.json", 1 << 20), "torch.json");
  r.torch = j.value("torch", "");
  for (const auto& v : j.at("losses")) r.theirs.push_back(v.get<double>());
  for (const auto& v : j.at("losses64")) r.exact.push_back(v.get<double>());
  if (r.theirs.size() != r.ours.size() || r.exact.size() != r.ours.size())
    throw std::runtime_error("pytorch peer: not one loss per step");
  auto rel_l2 = [](const float* a, const float* b, std::size_t n) {
    L2Error e;
    e.add(a, b, n);
    return e.rel();
  };
  int slot = 0;
  for (int k : {1, steps}) {
    SeqParity::Grads g;
    g.step = k;
    const auto ps = m->params();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::string file = std::to_string(k) + "/" + ps[i]->name + ".f32";
      const auto theirs = read_floats(dir + "/torch_grads_" + file, ps[i]->size());
      const auto exact = read_floats(dir + "/torch64_grads_" + file, ps[i]->size());
      const float* ours = grads[std::size_t(slot)][i].data();
      const double e = rel_l2(ours, theirs.data(), theirs.size());
      if (e > g.worst || g.worst_name.empty()) g.worst = e, g.worst_name = ps[i]->name;
      const double eo = rel_l2(ours, exact.data(), exact.size()), et = rel_l2(theirs.data(), exact.data(), exact.size());
      const double ratio = eo / std::max(et, SeqParity::kRatioFloor);
      if (ratio > g.worst_ratio || g.ratio_name.empty())
        g.worst_ratio = ratio, g.ratio_name = ps[i]->name, g.ours_exact = eo, g.theirs_exact = et;
    }
    r.grads.push_back(g);
    ++slot;
    if (steps == 1) break;
  }
  return r;
}

}  // namespace dlb::bench
