// Launching suite dist (harness/dist.h): relaunch under mpirun, join a world started by mpirun/srun,
// refuse a launch whose world is not the one asked for, and record the distributed context.
#include "harness/dist.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <csignal>
#include <thread>

#include "bench/suite.h"
#include "harness/run/plan.h"
#include "harness/sweep.h"
#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"

extern char** environ;

namespace dlb::harness {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Who started this process: mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE), srun (SLURM_STEP_ID with
// PMIx), or nobody ("").
std::string launcher() {
  if (env("SLURM_STEP_ID") && (env("PMIX_RANK") || env("SLURM_PROCID"))) return "srun";
  if (env("OMPI_COMM_WORLD_SIZE")) return "mpirun";
  if (env("PMIX_RANK")) return "pmix";
  return "";
}

// The world size the launcher says it started (0 when it says nothing).
int launched_size() {
  for (const char* v : {"DLB_DIST_RANKS", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMIX_SIZE"})
    if (const char* s = env(v)) return std::atoi(s);
  return 0;
}

int cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

// This process's own arguments, as started (the relaunch repeats them under mpirun).
std::vector<std::string> own_args() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(f, a, '\0');) args.push_back(a);
  return args;
}

int relaunch(int ranks) {
  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(ranks), "--bind-to", "none"};
  if (const char* extra = env("DLB_MPIRUN_ARGS")) {  // e.g. a hostfile and launch agent
    std::istringstream is(extra);
    for (std::string w; is >> w;) cmd.push_back(w);
  }
  char exe[4096] = {};
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  cmd.push_back(exe);  // resolved here: under mpirun, /proc/self/exe would be mpirun's own
  const auto args = own_args();
  cmd.insert(cmd.end(), args.begin() + (args.empty() ? 0 : 1), args.end());
  setenv("DLB_DIST_RANKS", std::to_string(ranks).c_str(), 1);
  if (geteuid() == 0) {  // mpirun refuses root without both
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  if (ranks > cores()) {  // more ranks than cores: allow it, and let waiting ranks yield the core
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed: cannot start mpirun");
  if (pid == 0) {
    std::vector<char*> av;
    for (auto& a : cmd) av.push_back(a.data());
    av.push_back(nullptr);
    execvp(av[0], av.data());
    std::fprintf(stderr, "dlbench: error: --ranks %d needs mpirun (Open MPI's openmpi-bin), which could not be started\n", ranks);
    std::_Exit(2);
  }
  // Ctrl-C reaches mpirun too (same process group), which passes it to the ranks: wait for its verdict.
  auto* old_int = std::signal(SIGINT, SIG_IGN);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::signal(SIGINT, old_int);
  if (WIFEXITED(status)) {
    const int rc = WEXITSTATUS(status);
    if (rc == 0 || rc == 1 || rc == 2 || rc == 130) return rc;
    std::cerr << "dlbench: error: the " << ranks << "-rank run ended abnormally (mpirun exit " << rc
              << "): a rank died or could not start; no complete results\n";
    return 1;
  }
  std::cerr << "dlbench: error: mpirun was killed by signal " << WTERMSIG(status) << "; no complete results\n";
  return 1;
}

// Test hook (tests/dist_run.sh rank_dies): with DLB_DIST_TEST_KILL_RANK=r (r > 0), rank r dies by
// SIGKILL after its first case, as a crashed process would, while the others are in a collective.
void fault_injection() {
  if (const char* r = env("DLB_DIST_TEST_KILL_RANK"))
    if (std::atoi(r) == comm::world().rank) {
      std::fflush(nullptr);
      kill(getpid(), SIGKILL);
    }
}

// Ranks other than 0: the same dist cases in the same order, with the same timing policy; nothing
// is written or printed (rank 0 records the slowest rank's times, which every rank computes).
int follow(const RunOptions& opts) {
  const Plan plan = plan_run(opts);  // as rank 0 plans it
  const TimingPolicy policy = timing_policy(opts);
  const Peaks none;
  std::size_t i = 0;
  for (const auto& [suite, c] : plan.cases) {
    if (!suite->distributed) continue;
    nlohmann::json record;
    run_case(c, i++, policy, none, record);
    if (i == 1) fault_injection();
  }
  return 0;
}

}  // namespace

std::vector<long long> parse_size_sweep(const std::string& text) {
  std::vector<long long> out;
  const long long max = 8LL << 30;
  for (const auto& item : parse_words(text, "--sizes")) {
    const auto dots = item.find("..");
    if (dots == std::string::npos) {
      for (long long v : parse_list(item, "--sizes", true, max)) out.push_back(v);
      continue;
    }
    const long long a = parse_list(item.substr(0, dots), "--sizes", true, max).at(0);
    const long long b = parse_list(item.substr(dots + 2), "--sizes", true, max).at(0);
    if (a > b) throw UsageError("--sizes '" + item + "': the range's start is above its end");
    for (long long v = a; v <= b; v *= 2) out.push_back(v);
  }
  return out;
}

nlohmann::json dist_context() {
  using json = nlohmann::json;
  const auto& w = comm::world();
  json c;
  c["world_size"] = w.size;
  c["launcher"] = launcher().empty() ? "none (one process)" : launcher();
  json hosts = json::array(), ranks = json::array();
  for (int r = 0; r < w.size && r < int(w.hosts.size()); ++r) {
    if (std::find(hosts.begin(), hosts.end(), w.hosts[std::size_t(r)]) == hosts.end()) hosts.push_back(w.hosts[std::size_t(r)]);
    ranks.push_back({{"rank", r}, {"host", w.hosts[std::size_t(r)]}});
  }
  // Local rank and GPU follow from the host order (as nccl-tests: lower ranks on the same host first;
  // a rank's own local rank comes from mpirun/srun where they set one, which agrees on one host per name).
  std::map<std::string, int> seen;
  for (auto& r : ranks) {
    const int local = seen[r["host"].get<std::string>()]++;
    r["local_rank"] = local;
    r["gpu"] = local;  // cuda cases use GPU local_rank; cpu cases use no GPU
  }
  c["hosts"] = hosts;
  c["ranks"] = ranks;
  c["mpi_version"] = comm::mpi_version();
  c["nccl_version"] = comm::nccl_version();
  json vars = json::object();
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("NCCL_", 0) == 0 || kv.rfind("OMPI_", 0) == 0 || kv.rfind("DLB_DIST_", 0) == 0 || kv.rfind("SLURM_JOB", 0) == 0 ||
        kv.rfind("SLURM_NTASKS", 0) == 0 || kv.rfind("SLURM_NNODES", 0) == 0) {
      const auto eq = kv.find('=');
      if (kv.rfind("OMPI_ALLOW_RUN_AS_ROOT", 0) != 0) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  c["env"] = vars;
  // This host's IPv4 interfaces (which one MPI uses is in OMPI_MCA_btl_tcp_if_include when set).
  json ifs = json::array();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char ip[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, ip, sizeof ip);
      ifs.push_back({{"name", a->ifa_name}, {"ipv4", ip}});
    }
    freeifaddrs(list);
  }
  c["network_interfaces"] = ifs;
  if (const char* cap = env("DLB_LINK_CAP")) c["link_cap"] = cap;  // set by whoever capped the link (tc tbf), e.g. "1gbit"
  // GPU topology where there is a GPU and nvidia-smi.
  if (!comm::nccl_version().empty() && access("/usr/bin/nvidia-smi", X_OK) == 0) {
    if (FILE* p = popen("/usr/bin/nvidia-smi topo -m 2>/dev/null", "r")) {
      std::string topo;
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) topo += buf;
      if (pclose(p) == 0 && !topo.empty()) c["gpu_topology"] = topo;
    }
  }
  return c;
}

int run_distributed(const RunOptions& opts, int ranks) {
  if (ranks < 0 || ranks > 1024) throw UsageError("--ranks " + std::to_string(ranks) + ": expected 1..1024");
  const std::string how = launcher();
  if (!comm::available()) {
    if (ranks > 1 || !how.empty()) throw UsageError("--suite dist across ranks: dlbench was built without MPI (install libopenmpi-dev and rebuild)");
    return run_suites(opts);  // its cases say they are unsupported
  }
  if (opts.list_only) return run_suites(opts);
  if (how.empty() && !env("DLB_DIST_RANKS") && ranks > 1) {
    resolve_devices(opts.device);  // bad --device: exit 2 here, before any rank starts
    return relaunch(ranks);
  }
  // srun without a PMI plugin Open MPI can use (--mpi=none): each process would be a world of one (and
  // Open MPI aborts in MPI_Init). Refuse before that, once per process.
  if (how == "srun" && !env("PMIX_RANK") && !env("PMI_RANK")) {
    throw UsageError(std::to_string(std::max(1, launched_size())) +
                     " task(s) were started by srun without PMIx; processes started without MPI would each run alone (use srun --mpi=pmix)");
  }
  // One rank of a world (or the only process): every rank lands here.
  if (!env("DLB_CPU_THREADS") && launched_size() > 1) {
    // Our CPU kernels split a batch over threads: share the cores between the ranks of this host.
    const char* local = env("OMPI_COMM_WORLD_LOCAL_SIZE");  // ranks on this host, where mpirun says
    const int guess = std::max(1, cores() / std::max(1, local ? std::atoi(local) : launched_size()));
    setenv("DLB_CPU_THREADS", std::to_string(guess).c_str(), 1);
  }
  comm::init();
  const auto& w = comm::world();
  const int want = ranks > 0 ? ranks : launched_size();
  if (want > 0 && want != w.size) {
    if (w.rank == 0)
      std::cerr << "dlbench: error: " << want << " ranks were asked for (" << (ranks > 0 ? "--ranks" : how.empty() ? "DLB_DIST_RANKS" : how)
                << ") but this MPI world has " << w.size << (w.size == 1 ? " (processes started without MPI run alone)" : "") << "\n";
    comm::finalize();
    return 2;
  }
  int rc = 0;
  try {
    rc = w.rank == 0 ? run_suites(opts) : follow(opts);
  } catch (const UsageError& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    if (w.size > 1) comm::abort(2);  // the other ranks wait in a collective: end them all
    rc = 2;
  } catch (const InputError& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    if (w.size > 1) comm::abort(2);
    rc = 2;
  } catch (const std::exception& e) {
    std::cerr << "dlbench: error: rank " << w.rank << ": " << e.what() << "\n";
    if (w.size > 1) comm::abort(1);
    rc = 1;
  }
  comm::finalize();
  return rc;
}

}  // namespace dlb::harness
