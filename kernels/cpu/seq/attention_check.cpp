// The sampled fp64 attention check (see attention_check.h). Per sampled head: row statistics m_i,
// l_i and O_i for every query (kept: dK and dV need P_ij and D_i = dO_i . O_i of every row), then the
// sampled rows' dQ_i = s sum_j dS_ij K_j and keys' dV_j = sum_i P_ij dO_i, dK_j = s sum_i dS_ij Q_i,
// with dS_ij = P_ij (dO_i . V_j - D_i). Rows run on the kernel threads.
#include "kernels/cpu/seq/attention_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/seq/parallel.h"

namespace dlb::cpu::seq {

namespace {

// The sample: n indices spread over [0, count), first and last included.
std::vector<int> spread(int count, int n) {
  std::vector<int> r;
  for (int s = 0; s < n && s < count; ++s) r.push_back(n >= count ? s : int((long(count - 1) * s) / std::max(1, n - 1)));
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

struct Err {
  double diff = 0, scale = 0;
  void add(double got, double ref) { diff = std::max(diff, std::abs(got - ref)), scale = std::max(scale, std::abs(ref)); }
  void merge(const Err& e) { diff = std::max(diff, e.diff), scale = std::max(scale, e.scale); }
  double rel() const { return std::isfinite(diff) ? diff / std::max(scale, 1e-30) : INFINITY; }
};

double dot(const float* x, const float* y, int D) {
  double s = 0;
  for (int d = 0; d < D; ++d) s += double(x[d]) * double(y[d]);
  return s;
}

}  // namespace

AttnCheck attention_check_sampled(const Attn& a, CView q, CView k, CView v, CView o, CView dout, CView dq, CView dk,
                                  CView dv, int samples) {
  a.check();
  const int Tq = a.Tq, Tk = a.Tk, D = a.D;
  const double sc = a.sc(), per_head = double(Tq) * Tk * D;
  const int heads = int(std::clamp(4e9 / per_head, 1.0, 4.0));
  const bool bwd = dout.p != nullptr;
  Err eo, edq, edk, edv;
  auto visible = [&](int i, int j) { return !a.causal || j <= i; };
  for (int bh : spread(a.B * a.H, heads)) {
    const int b = bh / a.H, h = bh % a.H;
    const float *qh = q.at(b, h), *kh = k.at(b, h), *vh = v.at(b, h);
    std::vector<double> lse(static_cast<std::size_t>(Tq)), oref(static_cast<std::size_t>(Tq) * D), rowdot(lse.size());
    std::vector<Err> row_err(static_cast<std::size_t>(Tq));
    parallel_rows(Tq, long(Tk) * D, [&](long lo, long hi) {
      std::vector<double> s(static_cast<std::size_t>(Tk));
      for (long i = lo; i < hi; ++i) {
        double m = -INFINITY;
        for (int j = 0; j < Tk; ++j)
          if (visible(int(i), j)) m = std::max(m, s[std::size_t(j)] = sc * dot(qh + i * q.st, kh + j * k.st, D));
        double l = 0;
        double* oi = &oref[std::size_t(i) * D];
        for (int j = 0; j < Tk; ++j) {
          if (!visible(int(i), j)) continue;
          const double p = std::exp(s[std::size_t(j)] - m);
          l += p;
          for (int d = 0; d < D; ++d) oi[d] += p * vh[j * v.st + d];
        }
        for (int d = 0; d < D; ++d) oi[d] /= l;
        lse[std::size_t(i)] = m + std::log(l);
        const float* got = o.at(b, h) + i * o.st;
        for (int d = 0; d < D; ++d) row_err[std::size_t(i)].add(got[d], oi[d]);
        if (bwd) {
          double r = 0;
          for (int d = 0; d < D; ++d) r += double(dout.at(b, h)[i * dout.st + d]) * oi[d];
          rowdot[std::size_t(i)] = r;
        }
      }
    });
    for (const Err& e : row_err) eo.merge(e);
    if (!bwd) continue;
    const float* gh = dout.at(b, h);
    auto ds = [&](int i, int j) {  // dS_ij (unscaled) and P_ij
      const double p = std::exp(sc * dot(qh + long(i) * q.st, kh + long(j) * k.st, D) - lse[std::size_t(i)]);
      return std::pair<double, double>{p * (dot(gh + long(i) * dout.st, vh + long(j) * v.st, D) - rowdot[std::size_t(i)]), p};
    };
    std::vector<double> acc(static_cast<std::size_t>(D)), acc2(acc.size());
    for (int i : spread(Tq, samples)) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j < Tk; ++j)
        if (visible(i, j)) {
          const double x = ds(i, j).first * sc;
          for (int d = 0; d < D; ++d) acc[std::size_t(d)] += x * kh[long(j) * k.st + d];
        }
      for (int d = 0; d < D; ++d) edq.add(dq.at(b, h)[long(i) * dq.st + d], acc[std::size_t(d)]);
    }
    for (int j : spread(Tk, samples)) {
      std::fill(acc.begin(), acc.end(), 0.0), std::fill(acc2.begin(), acc2.end(), 0.0);
      for (int i = 0; i < Tq; ++i)
        if (visible(i, j)) {
          const auto [x, p] = ds(i, j);
          for (int d = 0; d < D; ++d) {
            acc[std::size_t(d)] += x * sc * qh[long(i) * q.st + d];
            acc2[std::size_t(d)] += p * gh[long(i) * dout.st + d];
          }
        }
      for (int d = 0; d < D; ++d) {
        edk.add(dk.at(b, h)[long(j) * dk.st + d], acc[std::size_t(d)]);
        edv.add(dv.at(b, h)[long(j) * dv.st + d], acc2[std::size_t(d)]);
      }
    }
  }
  AttnCheck r;
  r.o = eo.rel();
  if (bwd) r.dq = edq.rel(), r.dk = edk.rel(), r.dv = edv.rel();
  return r;
}

}  // namespace dlb::cpu::seq
