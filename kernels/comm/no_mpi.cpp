// Built without MPI: one process, no collectives. The dist suite's cases then report themselves
// unsupported, and `dlbench run --suite dist --ranks N` (N > 1) is refused.
#include <cstdlib>
#include <unistd.h>

#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"

namespace dlb::comm {

namespace {
[[noreturn]] void none() { throw Unsupported("dlbench was built without MPI (install libopenmpi-dev and rebuild)"); }
}  // namespace

bool available() { return false; }
bool initialized() { return false; }
void init() { none(); }
void finalize() {}
void abort(int code) { std::_Exit(code); }
const WorldInfo& world() {
  static WorldInfo w = [] {
    WorldInfo i;
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    i.hosts = {host};
    return i;
  }();
  return w;
}
std::string mpi_version() { return ""; }
void barrier() { none(); }
void barrier_idle() { none(); }
double max_over_ranks(double) { none(); }
long long sum_over_ranks(long long) { none(); }
void broadcast_bytes(void*, std::size_t, int) { none(); }
std::vector<char> allgather_bytes(const void*, std::size_t) { none(); }
std::unique_ptr<Collective> make_mpi_collective(Op, std::size_t, bool) { none(); }
std::unique_ptr<Pending> iallreduce_sum(float*, std::size_t) { none(); }

}  // namespace dlb::comm
