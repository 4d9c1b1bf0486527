// Suite "matmul": C = A x B, fp32 on OpenBLAS (more implementations arrive with issue 3).
#include <cblas.h>

#include <vector>

#include "bench/case.h"

namespace dlb::bench {

namespace {
class SgemmOpenBlas final : public Case {
 public:
  explicit SgemmOpenBlas(long long n) : n_(n) {}
  void setup() override {
    const std::size_t nn = static_cast<std::size_t>(n_) * n_;
    try {
      a_.resize(nn), b_.resize(nn), c_.resize(nn);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("3 x " + std::to_string(n_) + "^2 floats");
    }
    fill_uniform(a_.data(), nn, 1);
    fill_uniform(b_.data(), nn, 2);
  }
  CheckResult verify() override {
    run();
    // fp64 reference on a few rows (O(n^2) each) keeps large sizes cheap.
    double worst = 0;
    const int rows = static_cast<int>(std::min<long long>(n_, 8));
    for (int r = 0; r < rows; ++r) {
      const long long i = (r * 7919LL) % n_;
      std::vector<double> ref(n_, 0.0);
      for (long long k = 0; k < n_; ++k)
        for (long long j = 0; j < n_; ++j) ref[j] += double(a_[i * n_ + k]) * b_[k * n_ + j];
      worst = std::max(worst, max_rel_err(&c_[i * n_], ref.data(), n_));
    }
    return judge(worst, default_tolerance(DType::fp32));
  }
  double run() override {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_, n_, n_, 1.0f, a_.data(), n_, b_.data(), n_, 0.0f,
                c_.data(), n_);
    return 0;
  }
  Work work() const override { return {2.0 * n_ * n_ * n_, 0, 0}; }
  Metric metric() const override { return Metric::gflops; }
  void teardown() override { a_ = {}, b_ = {}, c_ = {}; }

 private:
  long long n_;
  std::vector<float> a_, b_, c_;
};
}  // namespace

Suite matmul_suite() {
  Suite s;
  s.name = "matmul";
  s.description = "C = A x B: OpenBLAS sgemm (fp32)";
  s.expand = [](const SuiteOptions& o) {
    std::vector<CaseSpec> cases;
    for (const auto& dev : o.devices) {
      if (dev != "cpu") continue;
      for (long long n : axis_ints(o, "size")) {
        CaseId id{"matmul", "sgemm", dev, "fp32", {}};
        id.with("impl", "openblas").with("size", n);
        cases.push_back({id, [n] { return std::make_unique<SgemmOpenBlas>(n); }});
      }
    }
    return cases;
  };
  return s;
}

}  // namespace dlb::bench
