// Unit tests for the CPU matmul kernels, their verification and the OpenBLAS core choice.
#include <gtest/gtest.h>

#include <strings.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_ref.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/openblas_core.h"
#include "bench/suite.h"

namespace {

using dlb::DType;
using namespace dlb::cpu;

struct Problem {
  long m, n, k;
  std::vector<float> a, b, c;
  Problem(long m_, long n_, long k_) : m(m_), n(n_), k(k_), a(m_ * k_), b(k_ * n_), c(m_ * n_, 0.f) {
    dlb::fill_uniform(a.data(), a.size(), 11);
    dlb::fill_uniform(b.data(), b.size(), 12);
  }
};

TEST(GemmReference, MatchesHandComputedProduct) {
  // [1 2 3; 4 5 6] x [7 8; 9 10; 11 12] = [58 64; 139 154]
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  double c[4];
  gemm_reference_fp64(a, b, c, 2, 2, 3);
  EXPECT_EQ(c[0], 58);
  EXPECT_EQ(c[1], 64);
  EXPECT_EQ(c[2], 139);
  EXPECT_EQ(c[3], 154);
}

// Odd sizes and degenerate shapes (k = 1, n = 1) for every CPU kernel against the fp64 reference.
class CpuSgemm : public ::testing::TestWithParam<std::tuple<long, long, long>> {};

TEST_P(CpuSgemm, OpenBlasMatchesReference) {
  auto [m, n, k] = GetParam();
  Problem p(m, n, k);
  sgemm_forward_openblas(p.a.data(), p.b.data(), p.c.data(), m, n, k);
  const auto r = check_gemm(p.a.data(), p.b.data(), p.c.data(), m, n, k, DType::fp32);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_LT(r.max_rel_err, 1e-5);
}

TEST_P(CpuSgemm, BlockedMatchesReference) {
  auto [m, n, k] = GetParam();
  Problem p(m, n, k);
  std::fill(p.c.begin(), p.c.end(), 123.f);  // must be overwritten, not accumulated into
  sgemm_forward_blocked(p.a.data(), p.b.data(), p.c.data(), m, n, k);
  const auto r = check_gemm(p.a.data(), p.b.data(), p.c.data(), m, n, k, DType::fp32);
  EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuSgemm,
                         ::testing::Values(std::make_tuple(1L, 1L, 1L), std::make_tuple(7L, 5L, 3L),
                                           std::make_tuple(65L, 1L, 300L), std::make_tuple(1L, 129L, 1L),
                                           std::make_tuple(100L, 100L, 100L), std::make_tuple(257L, 130L, 300L),
                                           std::make_tuple(33L, 517L, 27L)));

TEST(GemmCheck, FreivaldsAgreesWithExactOnACorrectProduct) {
  Problem p(300, 200, 250);
  sgemm_forward_openblas(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k);
  GemmCheckOptions f;
  f.force_freivalds = true;
  const double exact = gemm_max_rel_err(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k);
  const double fr = gemm_max_rel_err(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, f);
  EXPECT_LT(exact, 1e-6);
  EXPECT_LT(fr, 1e-5);
  EXPECT_TRUE(check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::fp32, f).ok);
}

// A deliberately wrong C must fail: one element off, a whole row zero, a transposed product,
// a NaN -- both in the exact and in the Freivalds mode.
TEST(GemmCheck, WrongResultsFail) {
  Problem p(129, 97, 113);
  sgemm_forward_openblas(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k);
  const std::vector<float> good = p.c;
  GemmCheckOptions fr;
  fr.force_freivalds = true;
  for (const GemmCheckOptions& opt : {GemmCheckOptions{}, fr}) {
    auto fails = [&](const std::vector<float>& c) {
      return !check_gemm(p.a.data(), p.b.data(), c.data(), p.m, p.n, p.k, DType::fp32, opt).ok;
    };
    EXPECT_FALSE(fails(good));
    auto c = good;
    c[50 * p.n + 33] += 0.05f;  // a single element off by ~1% of the scale
    EXPECT_TRUE(fails(c)) << "single element, freivalds=" << opt.force_freivalds;
    c = good;
    for (long j = 0; j < p.n; ++j) c[70 * p.n + j] = 0.f;  // one row never written
    EXPECT_TRUE(fails(c)) << "zero row";
    c = good;
    std::swap(c[0], c[1]);  // two outputs swapped
    EXPECT_TRUE(fails(c)) << "swap";
    c = good;
    c[p.c.size() - 1] = std::nanf("");
    EXPECT_TRUE(fails(c)) << "NaN";
  }
}

TEST(GemmCheck, LargeProductsUseFreivaldsAndCatchABadBlock) {
  // 512 x 512 x 512 > kExactCheckMaxMNK / 2: still exact; 1024 x 256 x 512 -> Freivalds path.
  Problem p(1024, 256, 512);
  ASSERT_GT(double(p.m) * p.n * p.k, kExactCheckMaxMNK);
  sgemm_forward_openblas(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k);
  auto r = check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::fp32);
  EXPECT_TRUE(r.ok) << r.message;
  for (long i = 300; i < 316; ++i)  // a 16 x 16 tile computed from the wrong k-panel: scaled by 0.9
    for (long j = 64; j < 80; ++j) p.c[i * p.n + j] *= 0.9f;
  r = check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::fp32);
  EXPECT_FALSE(r.ok);
  EXPECT_GT(r.max_rel_err, 1e-5);
}

TEST(GemmCheck, ToleranceFollowsTheDtype) {
  Problem p(40, 40, 40);
  sgemm_forward_openblas(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k);
  for (auto& x : p.c) x *= 1.0f + 1e-4f;  // 1e-4 relative: too far for fp32, fine for tf32/bf16
  EXPECT_FALSE(check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::fp32).ok);
  EXPECT_TRUE(check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::tf32).ok);
  EXPECT_TRUE(check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::bf16).ok);
}

TEST(HalfConversions, RoundTripAndRounding) {
  for (float x : {0.f, 1.f, -2.5f, 0.15625f, 65504.f, -0.125f}) {
    EXPECT_EQ(fp16_to_float(float_to_fp16(x)), x) << x;  // exactly representable in fp16
    EXPECT_NEAR(bf16_to_float(float_to_bf16(x)), x, std::fabs(x) / 256) << x;
  }
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);                    // overflow -> inf
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);       // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);       // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  for (float x = -1.f; x < 1.f; x += 0.001f) {
    EXPECT_LE(std::fabs(fp16_to_float(float_to_fp16(x)) - x), std::ldexp(std::fabs(x), -11) + 1e-7f);
    EXPECT_LE(std::fabs(bf16_to_float(float_to_bf16(x)) - x), std::ldexp(std::fabs(x), -8) + 1e-30f);
  }
}

// ---- OpenBLAS core choice
const std::set<std::string> kZen5 = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq",
                                     "avx512vl", "avx512cd", "avx512_bf16", "avx512_vnni"};
const std::set<std::string> kSkylakeX = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq",
                                         "avx512vl", "avx512cd"};
const std::set<std::string> kZen3 = {"sse4_2", "avx", "avx2", "fma"};

TEST(OpenBlasCore, Zen5WithHaswellKernelsMovesToAvx512) {
  const auto c = choose_openblas_core(kZen5, "Haswell");
  EXPECT_TRUE(c.change);
  EXPECT_EQ(c.core, "Cooperlake");  // SkylakeX sgemm kernels + sbgemm, since the CPU has avx512_bf16
  EXPECT_NE(c.reason.find("AVX-512"), std::string::npos);
  EXPECT_EQ(choose_openblas_core(kZen5, "Zen").core, "Cooperlake");
}

TEST(OpenBlasCore, SkylakeXWithoutBf16GetsSkylakeX) {
  const auto c = choose_openblas_core(kSkylakeX, "Haswell");
  EXPECT_TRUE(c.change);
  EXPECT_EQ(c.core, "SkylakeX");
  EXPECT_FALSE(choose_openblas_core(kSkylakeX, "SkylakeX").change);
}

TEST(OpenBlasCore, Zen3KeepsTheLibrarysAvx2Core) {
  for (const char* lib : {"Zen", "Haswell"}) {
    const auto c = choose_openblas_core(kZen3, lib);
    EXPECT_FALSE(c.change) << lib;
    EXPECT_EQ(c.core, lib);
  }
  // A library that fell back to AVX-only kernels on an AVX2 CPU is moved up, never to AVX-512.
  const auto c = choose_openblas_core(kZen3, "Sandybridge");
  EXPECT_TRUE(c.change);
  EXPECT_EQ(c.core, "Haswell");
}

TEST(OpenBlasCore, NeverDowngradesOrPicksUnsupportedIsa) {
  EXPECT_FALSE(choose_openblas_core(kSkylakeX, "SapphireRapids").change);
  EXPECT_FALSE(choose_openblas_core(kZen5, "Cooperlake").change);
  EXPECT_FALSE(choose_openblas_core({"sse2"}, "Prescott").change);
  EXPECT_EQ(choose_openblas_core({"avx"}, "Nehalem").core, "Sandybridge");
  EXPECT_EQ(openblas_core_tier("skylakex"), 3);  // OpenBLAS compares names case-insensitively
  EXPECT_EQ(openblas_core_tier("Zen"), 2);
  EXPECT_EQ(openblas_core_tier("Unknown"), 0);
}

TEST(OpenBlasCore, CandidatesAreTheWidestTierPlusTheLibrarysPick) {
  using V = std::vector<std::string>;
  EXPECT_EQ(openblas_sgemm_candidates(kZen3, "Zen"), (V{"Haswell", "Zen"}));
  EXPECT_EQ(openblas_sgemm_candidates(kZen3, "zen"), (V{"Haswell", "Zen"}));  // case-insensitive
  // Excavator's kernels need FMA4 and XOP (Bulldozer family only; Zen raises SIGILL).
  auto excavator = kZen3;
  excavator.insert({"fma4", "xop"});
  EXPECT_EQ(openblas_sgemm_candidates(excavator, "Excavator"), (V{"Haswell", "Zen", "Excavator"}));
  // Zen 5: the AVX-512 cores it can run, and the library's AVX2 pick to measure what the choice gains.
  EXPECT_EQ(openblas_sgemm_candidates(kZen5, "Haswell"), (V{"SkylakeX", "Cooperlake", "Haswell"}));
  EXPECT_EQ(openblas_sgemm_candidates(kSkylakeX, "SkylakeX"), (V{"SkylakeX"}));  // no bf16: no Cooperlake
  EXPECT_EQ(openblas_sgemm_candidates(kSkylakeX, ""), (V{"SkylakeX"}));
  EXPECT_TRUE(openblas_sgemm_candidates({"sse2"}, "Prescott").empty());
}

// Our choice from the CPU's flags, whatever core the library picked by itself (an old OpenBLAS that
// does not know a new CPU picks Prescott: Debian's 0.3.21 on an Emerald Rapids Xeon). Flag sets as
// /proc/cpuinfo prints them (the flags the choice reads, and some it must ignore).
TEST(OpenBlasCore, ChoiceFromFlagsOnEveryKindOfCpu) {
  const std::set<std::string> kEmeraldRapids = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq",
                                                "avx512vl", "avx512cd", "avx512_bf16", "avx512_fp16", "avx512_vnni",
                                                "amx_bf16", "amx_tile", "amx_int8"};
  const std::set<std::string> kZen4 = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl",
                                       "avx512cd", "avx512_bf16", "avx512_vnni", "avx512ifma", "avx512vbmi"};
  const std::set<std::string> kSandyBridge = {"sse4_2", "avx"};
  const std::set<std::string> kCore2 = {"sse2", "ssse3", "sse4_1"};
  struct Row {
    const char* cpu;
    const std::set<std::string>* flags;
    std::vector<std::string> library;  // what the library may have picked by itself
    std::string want;                  // the core we run with
  };
  const std::vector<Row> rows = {
      {"Emerald Rapids", &kEmeraldRapids, {"Prescott", "Nehalem", "Haswell", "Zen", ""}, "Cooperlake"},
      // An AVX-512 pick of the library is kept (same sgemm kernels): SkylakeX, Cooperlake, and
      // SapphireRapids, which this CPU runs (AMX and fp16).
      {"Emerald Rapids", &kEmeraldRapids, {"SkylakeX", "Cooperlake", "SapphireRapids"}, ""},
      {"Zen 4", &kZen4, {"Prescott", "Zen", "Haswell"}, "Cooperlake"},
      {"Zen 4", &kZen4, {"SkylakeX", "Cooperlake"}, ""},
      {"Zen 5", &kZen5, {"Prescott", "Zen", "Haswell"}, "Cooperlake"},
      {"Skylake-SP", &kSkylakeX, {"Prescott", "Haswell", "Sandybridge"}, "SkylakeX"},
      {"Zen 3", &kZen3, {"Prescott", "Nehalem", "Sandybridge", ""}, "Haswell"},
      {"Zen 3", &kZen3, {"Zen"}, "Zen"},
      {"Zen 3", &kZen3, {"Haswell"}, "Haswell"},
      {"Sandy Bridge", &kSandyBridge, {"Prescott", "Nehalem"}, "Sandybridge"},
      {"Core 2", &kCore2, {"Core2", "Prescott"}, ""},  // "": nothing better, the library's pick stays
  };
  for (const auto& r : rows) {
    for (const auto& lib : r.library) {
      const auto c = choose_openblas_core(*r.flags, lib);
      const std::string want = r.want.empty() ? lib : r.want;
      EXPECT_EQ(c.core, want) << r.cpu << ", library picked '" << lib << "': " << c.reason;
      EXPECT_EQ(c.change, want != lib) << r.cpu << ", " << lib;
      if (c.change) {
        EXPECT_TRUE(openblas_core_runs_on(*r.flags, c.core)) << r.cpu << " cannot run " << c.core;
        EXPECT_FALSE(choose_openblas_core(*r.flags, c.core).change) << r.cpu << ": " << c.core << " is not final";
      }
    }
  }
  // What a CPU can execute: never a wider ISA than its flags, Excavator only with FMA4 and XOP.
  EXPECT_TRUE(openblas_core_runs_on(kEmeraldRapids, "SapphireRapids"));
  EXPECT_FALSE(openblas_core_runs_on(kZen3, "SkylakeX"));
  EXPECT_FALSE(openblas_core_runs_on(kZen3, "Excavator"));
  EXPECT_FALSE(openblas_core_runs_on(kSandyBridge, "Haswell"));
  EXPECT_FALSE(openblas_core_runs_on(kZen5, "NoSuchCore"));
}

// The CLI end to end: build/bin/dlbench re-executes itself with the core it chose, before any
// OpenBLAS work, and `info --json` reports that core and how it was chosen. Nothing here depends
// on the library recognising this CPU: the expected core is computed from this CPU's flags and the
// library's own pick as the child reports it. (Assumes only that OpenBLAS honours OPENBLAS_CORETYPE,
// which is what the re-execution is for.)
nlohmann::json cli_info(const std::string& env) {
  const std::string cmd = "env -u OPENBLAS_CORETYPE -u DLBENCH_OPENBLAS_CORE -u DLBENCH_OPENBLAS_REEXEC " + env +
                          " '" DLB_CLI_PATH "' info --json 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  if (st != 0) return {{"exit_status", st}, {"output", out}};
  return nlohmann::json::parse(out, nullptr, false);
}

bool same_core(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

TEST(OpenBlasCore, CliRunsTheCoreItChoseForThisCpu) {
  const auto flags = read_cpu_flags();
  ASSERT_FALSE(flags.empty());
  const auto info = cli_info("");
  ASSERT_TRUE(info.is_object() && info.contains("openblas")) << info.dump();
  const auto& ob = info.at("openblas");
  const std::string core = ob.value("core", ""), library = ob.value("core_library", "");
  EXPECT_EQ(ob.value("core_mode", ""), "auto") << ob.dump();
  ASSERT_FALSE(library.empty()) << ob.dump();
  const auto want = choose_openblas_core(flags, library);
  EXPECT_TRUE(same_core(core, want.core)) << "runs " << core << ", chose " << want.core << " (library: " << library
                                          << "): " << ob.value("core_reason", "");
  EXPECT_EQ(ob.value("core_reason", ""), want.reason);
  // Whatever runs, this CPU executes it (a known core) and nothing wider exists for it.
  if (openblas_core_tier(core) > 0) {
    EXPECT_TRUE(openblas_core_runs_on(flags, core)) << core;
  }
  EXPECT_FALSE(choose_openblas_core(flags, core).change) << core;
  // The re-execution itself, on any CPU that runs AVX2 (where the library's own pick needs none):
  // forcing a core other than the library's re-executes once with it, and says so.
  const std::string other = same_core(library, "Haswell") ? "Zen" : "Haswell";
  if (openblas_core_runs_on(flags, other)) {
    const auto forced = cli_info("DLBENCH_OPENBLAS_CORE=" + other);
    ASSERT_TRUE(forced.is_object() && forced.contains("openblas")) << forced.dump();
    const auto& fo = forced.at("openblas");
    EXPECT_TRUE(same_core(fo.value("core", ""), other)) << fo.dump();
    EXPECT_EQ(fo.value("core_mode", ""), "forced") << fo.dump();
    EXPECT_TRUE(same_core(fo.value("core_library", ""), library)) << fo.dump();
  }
  // DLBENCH_OPENBLAS_CORE=library: no re-execution, the library's own pick runs and is reported as such.
  const auto lib = cli_info("DLBENCH_OPENBLAS_CORE=library");
  ASSERT_TRUE(lib.is_object() && lib.contains("openblas")) << lib.dump();
  EXPECT_EQ(lib.at("openblas").value("core_mode", ""), "library");
  EXPECT_TRUE(same_core(lib.at("openblas").value("core", ""), library)) << lib.at("openblas").dump();
}

TEST(CpuBf16, UnsupportedReasonIsHonest) {
  const auto flags = read_cpu_flags();
  const std::string why = cpu_bf16_gemm_unsupported_reason();
  if (!flags.count("avx512_bf16")) {
    EXPECT_NE(why.find("avx512_bf16"), std::string::npos);
  }
  if (why.empty()) {  // supported here: it must also be right
    Problem p(33, 17, 64);
    std::vector<std::uint16_t> a(p.a.size()), b(p.b.size());
    for (std::size_t i = 0; i < a.size(); ++i) p.a[i] = bf16_to_float(a[i] = float_to_bf16(p.a[i]));
    for (std::size_t i = 0; i < b.size(); ++i) p.b[i] = bf16_to_float(b[i] = float_to_bf16(p.b[i]));
    sbgemm_forward_openblas(a.data(), b.data(), p.c.data(), p.m, p.n, p.k);
    EXPECT_TRUE(check_gemm(p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, DType::bf16).ok);
  } else {
    EXPECT_THROW(sbgemm_forward_openblas(nullptr, nullptr, nullptr, 1, 1, 1), dlb::Unsupported);
  }
}

}  // namespace

namespace {

nlohmann::json gpu_record(const std::string& impl, double gflops, bool dispatch_bound) {
  return {{"device", "cuda:0"}, {"dtype", "fp32"}, {"m", 64}, {"n", 64}, {"k", 64}, {"impl", impl},
          {"gflops", gflops}, {"dispatch_bound", dispatch_bound}};
}

std::string matmul_summary(const std::vector<nlohmann::json>& records) {
  std::ostringstream out;
  dlb::bench::find_suite("matmul")->summarize(records, out);
  return out.str();
}

// A dispatch_bound case timed kernel launches, not the kernel: no ratio row on either side.
TEST(MatmulSummary, DispatchBoundCasesStayOutOfTheRatios) {
  const std::string both = matmul_summary({gpu_record("cublas", 100, false), gpu_record("warptile", 50, false)});
  EXPECT_NE(both.find("warptile"), std::string::npos) << both;
  EXPECT_NE(both.find("50.0%"), std::string::npos) << both;
  EXPECT_EQ(both.find("left out"), std::string::npos) << both;
  for (const auto& recs : {std::vector<nlohmann::json>{gpu_record("cublas", 100, false), gpu_record("warptile", 50, true)},
                           std::vector<nlohmann::json>{gpu_record("cublas", 100, true), gpu_record("warptile", 50, false)}}) {
    const std::string s = matmul_summary(recs);
    EXPECT_EQ(s.find("| warptile"), std::string::npos) << s;
    EXPECT_NE(s.find("1 case(s) left out of the ratios: dispatch_bound"), std::string::npos) << s;
  }
}

}  // namespace
