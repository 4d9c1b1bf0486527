// The MPI backend (Open MPI): world setup, helpers, the four collectives on CPU buffers, and the
// non-blocking all-reduce the data-parallel step overlaps with backward.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"

namespace dlb::comm {

namespace {
WorldInfo g_world;
bool g_init = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + ": " + std::string(msg, std::size_t(len)));
}
}  // namespace

bool available() { return true; }
bool initialized() { return g_init; }

void init() {
  if (g_init) return;
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  g_init = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  const auto all = allgather_bytes(host, sizeof host);
  g_world.hosts.clear();
  g_world.local_rank = 0;
  g_world.local_size = 0;
  for (int r = 0; r < g_world.size; ++r) {
    std::string h(all.data() + std::size_t(r) * sizeof host, strnlen(all.data() + std::size_t(r) * sizeof host, sizeof host));
    if (h == host) {
      if (r < g_world.rank) ++g_world.local_rank;
      ++g_world.local_size;
    }
    g_world.hosts.push_back(h);
  }
  // The launcher's own word on the local rank where it gives one (mpirun, srun); the hostnames
  // (what nccl-tests uses) otherwise.
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* s = std::getenv(v); s && *s) {
      g_world.local_rank = std::atoi(s);
      break;
    }
}

void finalize() {
  if (!g_init) return;
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
  g_init = false;
}

void abort(int code) {
  if (g_init) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

const WorldInfo& world() {
  if (g_world.hosts.empty()) {
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    g_world.hosts = {host};
  }
  return g_world;
}

std::string mpi_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, std::size_t(len));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  if (auto p = s.find(", package"); p != std::string::npos) s = s.substr(0, p);
  return s;
}

void barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void barrier_idle() {
  MPI_Request req;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

double max_over_ranks(double v) {
  double out = v;
  check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

long long sum_over_ranks(long long v) {
  long long out = v;
  check(MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return out;
}

void broadcast_bytes(void* buf, std::size_t bytes, int root) {
  check(MPI_Bcast(buf, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

std::vector<char> allgather_bytes(const void* buf, std::size_t bytes) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<char> out(bytes * std::size_t(n));
  check(MPI_Allgather(buf, int(bytes), MPI_BYTE, out.data(), int(bytes), MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
  return out;
}

namespace {
// MPI counts are int: a 1 GB fp32 buffer (2^28 elements) fits.
int icount(std::size_t n) {
  if (n > std::size_t(INT32_MAX)) throw UsageError("collective of " + std::to_string(n) + " elements: above MPI's int count");
  return int(n);
}

class MpiCollective : public Collective {
 public:
  MpiCollective(Op op, std::size_t count, bool inplace) : op_(op), count_(count), inplace_(inplace) {
    const int n = world().size;
    if (count % std::size_t(n) && (op == Op::all_gather || op == Op::reduce_scatter))
      throw UsageError(std::string(op_name(op)) + " of " + std::to_string(count) + " elements: not a multiple of " + std::to_string(n) + " ranks");
    per_ = count / std::size_t(n);
    try {
      a_.assign(count, 0.0f);
      if (!inplace) b_.assign(count, 0.0f);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("collective buffers of " + std::to_string(count * 4 * (inplace ? 1 : 2)) + " bytes");
    }
  }
  void load(const std::vector<float>& in) override {
    const std::size_t at = inplace_ && op_ == Op::all_gather ? per_ * std::size_t(world().rank) : 0;
    std::copy(in.begin(), in.end(), a_.begin() + std::ptrdiff_t(at));
  }
  double run(int iters) override {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) once();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<float> output() override {
    const auto& o = inplace_ ? a_ : b_;
    const std::size_t n = output_count(op_, count_, world().size);
    return {o.begin(), o.begin() + std::ptrdiff_t(n)};  // MPI's in-place reduce-scatter leaves it at the start
  }

 private:
  void once() {
    float* a = a_.data();
    float* out = inplace_ ? a : b_.data();
    switch (op_) {
      case Op::all_reduce:
        check(MPI_Allreduce(inplace_ ? MPI_IN_PLACE : a, out, icount(count_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        break;
      case Op::all_gather:
        check(MPI_Allgather(inplace_ ? MPI_IN_PLACE : a, icount(per_), MPI_FLOAT, out, icount(per_), MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
        break;
      case Op::reduce_scatter:
        check(MPI_Reduce_scatter_block(inplace_ ? MPI_IN_PLACE : a, out, icount(per_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
        break;
      case Op::broadcast:
        if (!inplace_ && world().rank == 0) std::memcpy(out, a, count_ * sizeof(float));  // root's send buffer -> its receive buffer
        check(MPI_Bcast(out, icount(count_), MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
        break;
    }
  }
  Op op_;
  std::size_t count_, per_ = 0;
  bool inplace_;
  std::vector<float> a_, b_;
};

class MpiPending : public Pending {
 public:
  explicit MpiPending(MPI_Request r) : req_(r) {}
  ~MpiPending() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }
  void wait() override {
    if (req_ != MPI_REQUEST_NULL) check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait");
  }

 private:
  MPI_Request req_;
};
}  // namespace

std::unique_ptr<Collective> make_mpi_collective(Op op, std::size_t count, bool inplace) {
  return std::make_unique<MpiCollective>(op, count, inplace);
}

std::unique_ptr<Pending> iallreduce_sum(float* buf, std::size_t count) {
  MPI_Request r;
  check(MPI_Iallreduce(MPI_IN_PLACE, buf, icount(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r), "MPI_Iallreduce");
  return std::make_unique<MpiPending>(r);
}

}  // namespace dlb::comm
