// `dlbench bisect GOOD BAD --suite S --filter CASE`: the first commit on BAD's first-parent history
// after GOOD where the case is SLOWER than at GOOD. GOOD is built and run once as the reference;
// each tested commit is checked out in one git worktree (its build folder kept between commits,
// ccache where installed), built with --build-cmd, run with --run-cmd (the same flags at every
// commit), and judged by compare's verdict against GOOD's run (compare.h):
//   SLOWER                 -> the slowdown is at or before this commit
//   SAME / FASTER          -> not yet
//   NOISY, FAILED, no build, no run, case not timed -> undecided: reported and stepped around (never
//                             taken for either side), like `git bisect skip`
// Exit codes: 0 the first SLOWER commit named; 1 BAD is not SLOWER than GOOD; 2 bad usage or input
// (not a repository, an unknown commit, GOOD not an ancestor of BAD, uncommitted changes in the
// repository's worktree, GOOD's build or run failing, --filter timing nothing at GOOD); 3 undecided
// commits leave several candidates (all printed).
#pragma once
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include "harness/compare.h"

namespace dlb::harness {

struct BisectOptions {
  std::string good, bad, suite, filter, device = "cpu";
  std::string repo = ".";
  std::string out;       // "" -> results/bisect-<time>
  std::string run_args;  // more flags for dlbench run ($DLBENCH_BISECT_ARGS)
  // Shell commands, run by /bin/sh in the worktree; the run command writes a results folder (or
  // results.json) at $DLBENCH_BISECT_OUT.
  std::string build_cmd = "cmake --preset release >/dev/null && cmake --build build -j\"$(nproc)\"";
  std::string run_cmd =
      "build/bin/dlbench run --suite \"$DLBENCH_BISECT_SUITE\" --device \"$DLBENCH_BISECT_DEVICE\" "
      "--filter \"$DLBENCH_BISECT_FILTER\" --no-report --out \"$DLBENCH_BISECT_OUT\" $DLBENCH_BISECT_ARGS";
  bool keep_worktree = false;
  CompareOptions compare;
};

// The search over the candidates (the commits after GOOD up to BAD, oldest first), one mark each.
enum class Mark { untested, good, slower, undecided };
constexpr std::size_t kNoProbe = static_cast<std::size_t>(-1);
// With hi = the first candidate marked slower and lo = the last one marked good before it (or GOOD
// itself): the untested candidate between them nearest their middle, or kNoProbe when none is left.
std::size_t next_probe(const std::vector<Mark>& marks);
// Once next_probe has nothing left: the candidates after lo up to hi, one of which is the first
// SLOWER commit (exactly one: found). Empty when no candidate is marked slower.
std::vector<std::size_t> suspects(const std::vector<Mark>& marks);

// Runs the bisection, printing progress and the outcome to `out`; returns the exit code above.
int run_bisect(const BisectOptions& o, std::ostream& out);

}  // namespace dlb::harness
