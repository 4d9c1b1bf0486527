// Machine fingerprint (see fingerprint.h).
#include "harness/fingerprint.h"
#include "harness/gpu_peaks.h"

#include <cblas.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness/build_info.h"
#include "kernels/common/device.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/openblas_core.h"
#include "kernels/cpu/threads.h"

extern char** environ;

namespace dlb::harness {

namespace {
std::string read_cpuinfo_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) {
        auto v = line.substr(c + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "";
}

std::string run_cmd(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 256> buf{};
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string openblas_version(const std::string& config) {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
  std::istringstream s(config);
  std::string a, b;
  s >> a >> b;
  return a == "OpenBLAS" ? b : "unknown";
}

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  return buf;
}

bool result_changing_env(const std::string& name) {
  static const char* prefixes[] = {"OPENBLAS_", "OMP_", "GOTO_", "CUDA_", "CUBLAS_", "CUDNN_", "NVIDIA_TF32", "DLBENCH_",
                                   "DLB_CPU_THREADS", "DLB_CPU_ISA", "DLB_CUBLAS_WORKSPACE", "DLB_RNN_STEP", "ONEDNN_", "DNNL_", "MKL_"};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}
}  // namespace

std::string cpu_model() {
  auto m = read_cpuinfo_field("model name");
  return m.empty() ? "unknown CPU" : m;
}

bool cpu_has_flag(const std::string& flag) {
  std::istringstream s(" " + read_cpuinfo_field("flags") + " ");
  std::string w;
  while (s >> w)
    if (w == flag) return true;
  return false;
}

std::vector<std::string> cpu_isa_flags() {
  static const char* interesting[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                      "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"};
  std::set<std::string> have;
  std::istringstream s(read_cpuinfo_field("flags"));
  std::string w;
  while (s >> w) have.insert(w);
  std::vector<std::string> out;
  for (const char* f : interesting)
    if (have.count(f)) out.push_back(f);
  return out;
}

nlohmann::json fingerprint(const std::vector<std::string>& argv) {
  using nlohmann::json;
  json fp;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  struct utsname u {};
  uname(&u);
  const auto& ci = benchmark::CPUInfo::Get();
  // Google Benchmark's own context keys first, so its tools read the file.
  fp["date"] = iso_now();
  fp["host_name"] = host;
  fp["executable"] = argv.empty() ? "dlbench" : argv[0];
  fp["num_cpus"] = ci.num_cpus;
  fp["mhz_per_cpu"] = static_cast<long long>(ci.cycles_per_second / 1e6);
  fp["cpu_scaling_enabled"] = ci.scaling == benchmark::CPUInfo::ENABLED;
  json caches = json::array();
  for (const auto& c : ci.caches)
    caches.push_back({{"type", c.type}, {"level", c.level}, {"size", c.size}, {"num_sharing", c.num_sharing}});
  fp["caches"] = caches;
  fp["load_avg"] = ci.load_avg;
  fp["library_build_type"] = std::string(DLB_BUILD_TYPE) == "Debug" ? "debug" : "release";
  fp["library_version"] = "v" + std::string(DLB_GBENCH_VERSION);  // Google Benchmark's, in its own form
  fp["json_schema_version"] = 1;  // the version of Google Benchmark's JSON layout its readers check for

  fp["dlbench_version"] = DLB_VERSION;
  fp["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  fp["compiler"] = DLB_CXX_COMPILER;
  fp["cuda_compiler"] = DLB_CUDA_COMPILER;
  fp["cpu"] = {{"model", cpu_model()},
               {"logical_cores", std::thread::hardware_concurrency()},
               {"isa", cpu_isa_flags()},
               // threads our CPU training kernels split a batch over (kernels/cpu/threads.h); their
               // GEMMs run single-threaded inside, so OpenBLAS's count below is for other BLAS calls
               {"kernel_threads", cpu::kernel_threads()},
               // SIMD level of our kernels and oneDNN: detected, and as capped by DLB_CPU_ISA (isa.h)
               {"isa_detected", cpu::isa_name(cpu::isa_detected())},
               {"isa_cap", cpu::isa_name(cpu::isa_cap())}};
  if (!cpu::isa_note().empty()) fp["cpu"]["isa_note"] = cpu::isa_note();
  // oneDNN (kernels/cpu/onednn/): built in or not, and the ISA it runs at under DLB_CPU_ISA
  fp["onednn"] = {{"available", cpu::onednn::available()}};
  if (cpu::onednn::available())
    fp["onednn"].update({{"version", cpu::onednn::version()}, {"isa", cpu::onednn::isa()},
                         {"bf16_native", cpu::onednn::bf16_native()}});
  else fp["onednn"]["reason"] = cpu::onednn::unavailable_reason();
  const std::string cfg = openblas_get_config();
  fp["openblas"] = {{"version", openblas_version(cfg)},
                    {"config", cfg},
                    {"core", openblas_get_corename()},
                    {"threads", openblas_get_num_threads()},
                    {"parallel", openblas_get_parallel()}};
  // How that core was chosen (kernels/cpu/openblas_core.h): the library's own pick, auto | library |
  // forced, and why. A test reads these from `info --json` to check the re-execution end to end.
  const cpu::CoreStatus core_st = cpu::openblas_core_status();
  fp["openblas"].update({{"core_library", core_st.library_core}, {"core_mode", core_st.mode}, {"core_reason", core_st.reason}});
  // The library of the layers' fp32 GEMMs (Linear, LM head, projections: kernels/cpu/sgemm.h) and why.
  fp["sgemm"] = {{"lib", cpu::sgemm_lib_name(cpu::sgemm_lib())}, {"reason", cpu::sgemm_lib_reason()}};

  const CudaInfo& cu = cuda_info();
  json gpus = json::array();
  for (const auto& g : cu.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"pci_bus_id", g.pci_bus_id},
                    {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
                    {"sms", g.sms},
                    {"sm_clock_mhz", g.sm_clock_mhz},
                    {"mem_clock_mhz", g.mem_clock_mhz},
                    {"mem_bus_width_bits", g.mem_bus_width_bits},
                    {"mem_total_bytes", g.mem_total_bytes},
                    {"ecc", g.ecc},
                    {"peak_fp32_gflops", g.peak_fp32_gflops},
                    {"peak_mem_gb_per_s", g.peak_mem_gb_per_s},
                    {"peaks", gpu_peaks_json(g)}});  // per dtype, with the SM clock each assumes
  fp["cuda"] = {{"built_with_cuda", cu.built_with_cuda},
                {"available", cu.available},
                {"reason", cu.reason},
                {"driver", cuda_version_string(cu.driver_version)},
                {"runtime", cuda_version_string(cu.runtime_version)},
                {"cublas", cu.cublas_version},
                {"cudnn", cu.cudnn_version},
                {"gpus", gpus}};

  // The source tree's HEAD, unless DLB_GIT_SHA names the build ("<sha>" or "<sha> (dirty)"): a
  // bundle run elsewhere (ci/device_run.sh passes the bundle's MANIFEST line) reads no tree of its
  // own, or a stale one: the H100 run of 2026-11-27 recorded the session's first HEAD, dirty.
  if (const char* given = std::getenv("DLB_GIT_SHA"); given && *given) {
    std::string v = given;
    const std::string mark = " (dirty)";
    const bool dirty = v.size() > mark.size() && v.compare(v.size() - mark.size(), mark.size(), mark) == 0;
    if (dirty) v.resize(v.size() - mark.size());
    fp["git"] = {{"sha", v}, {"dirty", dirty}, {"from", "DLB_GIT_SHA"}};
  } else {
    const std::string src = DLB_SOURCE_DIR;
    std::string sha = run_cmd("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
    std::string dirty = sha.empty() ? "" : run_cmd("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null");
    fp["git"] = {{"sha", sha.empty() ? "unknown" : sha}, {"dirty", !dirty.empty()}};
  }
  fp["argv"] = argv;
  json env = json::object();
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && result_changing_env(kv.substr(0, eq))) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  fp["env"] = env;
  return fp;
}

std::string fingerprint_text(const nlohmann::json& fp) {
  std::ostringstream o;
  const auto& cpu = fp.at("cpu");
  o << "host          " << fp.value("host_name", "") << "  (" << fp.value("os", "") << ")\n";
  o << "CPU           " << cpu.value("model", "") << ", " << cpu.value("logical_cores", 0) << " logical cores, "
    << cpu.value("kernel_threads", 0) << " training-kernel threads\n";
  std::string isa;
  for (const auto& f : cpu.at("isa")) isa += (isa.empty() ? "" : " ") + f.get<std::string>();
  o << "ISA           " << (isa.empty() ? "(none of interest)" : isa) << "\n";
  o << "kernel ISA    " << cpu.value("isa_cap", "?") << " (detected " << cpu.value("isa_detected", "?")
    << "; cap with DLB_CPU_ISA=scalar|avx2|avx512|avx512_bf16|auto)";
  if (cpu.contains("isa_note")) o << "  note: " << cpu.value("isa_note", "");
  o << "\n";
  if (fp.contains("onednn")) {
    const auto& dn = fp.at("onednn");
    o << "oneDNN        "
      << (dn.value("available", false) ? dn.value("version", "") + ", ISA " + dn.value("isa", "") +
                                             (dn.value("bf16_native", false) ? ", native bf16" : ", bf16 emulated")
                                       : dn.value("reason", ""))
      << "\n";
  }
  const auto& ob = fp.at("openblas");
  o << "OpenBLAS      " << ob.value("version", "") << ", core " << ob.value("core", "") << ", "
    << ob.value("threads", 0) << " threads  [" << ob.value("config", "") << "]\n";
  if (ob.contains("core_reason") && ob["core_reason"].is_string() && !ob.value("core_reason", "").empty())
    o << "OpenBLAS core " << ob.value("core_mode", "") << ": " << ob.value("core_reason", "") << "\n";
  if (fp.contains("sgemm"))
    o << "layer GEMMs   " << fp.at("sgemm").value("lib", "") << " (" << fp.at("sgemm").value("reason", "")
      << "; DLB_SGEMM=openblas|onednn|auto)\n";
  if (fp.contains("peaks") && fp.at("peaks").contains("error")) {
    o << "CPU peaks     not measured (" << fp.at("peaks").value("error", "") << ")\n";
  } else if (fp.contains("peaks")) {
    const auto& p = fp.at("peaks");
    char buf[200];
    std::snprintf(buf, sizeof buf, "CPU peaks     %.1f GFLOP/s fp32 FMA (%s, %d threads), %.1f GB/s memory\n",
                  p.value("cpu_fp32_gflops", 0.0), p.value("cpu_fma_isa", "").c_str(), p.value("threads", 0),
                  p.value("cpu_mem_gb_per_s", 0.0));
    o << buf;
  }
  const auto& cu = fp.at("cuda");
  // cuBLAS and cuDNN encode versions as major*10000 + minor*100 + patch.
  auto lib = [](int v) {
    return v <= 0 ? std::string("n/a")
                  : std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  };
  o << "CUDA          driver " << cu.value("driver", "") << ", runtime " << cu.value("runtime", "") << ", cuBLAS "
    << lib(cu.value("cublas", 0)) << ", cuDNN " << lib(cu.value("cudnn", 0)) << "\n";
  if (!cu.value("available", false)) {
    o << "GPUs          " << cu.value("reason", "no CUDA device") << "\n";
  } else {
    for (const auto& g : cu.at("gpus")) {
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "GPU %-9d %s (sm_%s, %d SMs, %.0f MHz, %.1f GiB, %.0f GB/s, %.1f TFLOP/s fp32, bus %s)\n",
                    g.value("index", 0), g.value("name", "").c_str(), g.value("compute_capability", "").c_str(),
                    g.value("sms", 0), g.value("sm_clock_mhz", 0.0),
                    g.value("mem_total_bytes", 0.0) / (1024.0 * 1024 * 1024), g.value("peak_mem_gb_per_s", 0.0),
                    g.value("peak_fp32_gflops", 0.0) / 1000, g.value("pci_bus_id", "").c_str());
      o << buf;
      // Every compute peak with the clock it assumes (harness/gpu_peaks.h).
      if (g.contains("peaks") && g.at("peaks").is_object() && !g.at("peaks").empty()) {
        std::string line = "  peaks      ";
        bool first = true;
        for (const auto& [dt, p] : g.at("peaks").items()) {
          std::snprintf(buf, sizeof buf, "%s %s %.1f TFLOP/s at %.0f MHz", first ? "" : ",", dt.c_str(),
                        p.value("gflops", 0.0) / 1000, p.value("clock_mhz", 0.0));
          line += buf;
          first = false;
        }
        o << line << "\n";
        for (const auto& [dt, p] : g.at("peaks").items())
          if (dt == "fp32" || dt == "bf16") o << "             " << dt << " clock: " << p.value("clock", "") << "\n";
      }
    }
  }
  o << "git           " << fp.at("git").value("sha", "") << (fp.at("git").value("dirty", false) ? " (dirty)" : "")
    << "\n";
  o << "build         dlbench " << fp.value("dlbench_version", "") << ", " << fp.value("compiler", "") << ", CUDA "
    << fp.value("cuda_compiler", "") << "\n";
  return o.str();
}

std::string machine_key(const nlohmann::json& fp) {
  std::string k = fp.at("cpu").value("model", "?") + " | OpenBLAS " + fp.at("openblas").value("version", "?") + " " +
                  fp.at("openblas").value("core", "?");
  for (const auto& g : fp.at("cuda").at("gpus")) k += " | " + g.value("name", "?");
  const auto& cu = fp.at("cuda");
  if (!cu.at("gpus").empty())
    k += " | CUDA " + cu.value("runtime", "?") + " cuBLAS " + std::to_string(cu.value("cublas", 0)) + " cuDNN " +
         std::to_string(cu.value("cudnn", 0));
  return k;
}

}  // namespace dlb::harness
