// Launching suite dist: `dlbench run --suite dist --ranks N` re-executes itself under mpirun; a
// process already started by mpirun or srun joins the MPI world and runs as one rank of it. Rank 0
// runs the ordinary run loop and writes the results; the other ranks run the same cases and write none.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/run/run.h"

namespace dlb::harness {

// `ranks`: --ranks (0 = not given). Returns the exit code (0, 1 verification failure, 2 bad usage, 130).
int run_distributed(const RunOptions& opts, int ranks);

// --sizes for dist: comma list of sizes with units (B, KB, MB, GB = powers of 1000; KiB, MiB, GiB),
// and ranges A..B that double from A up to B, as nccl-tests' -b/-e/-f 2 ("8B..1GiB").
std::vector<long long> parse_size_sweep(const std::string& text);

// The context of a dist run (rank 0): world size, launcher, hosts, rank -> host/device map, MPI and
// NCCL versions, network interfaces, every NCCL_* and OMPI_* variable, link cap, GPU topology.
nlohmann::json dist_context();

}  // namespace dlb::harness
