// Tests for harness/bisect's search: which candidate is built next and which ones are left as the
// first SLOWER commit, over hand-set marks (good, slower, undecided) of the commits after GOOD.
#include <gtest/gtest.h>

#include <vector>

#include "harness/bisect.h"

using namespace dlb::harness;

namespace {

constexpr Mark U = Mark::untested, G = Mark::good, S = Mark::slower, N = Mark::undecided;

// Runs the search with a fixed truth: marks[i] is what testing candidate i would give.
std::vector<std::size_t> search(const std::vector<Mark>& truth, std::size_t* probes) {
  std::vector<Mark> m(truth.size(), U);
  m.back() = truth.back();
  *probes = 1;
  for (std::size_t i; (i = next_probe(m)) != kNoProbe; ++*probes) {
    EXPECT_EQ(m[i], U) << "candidate " << i << " probed twice";
    m[i] = truth[i];
  }
  return suspects(m);
}

}  // namespace

TEST(Bisect, NextProbeIsTheMiddleOfTheOpenRange) {
  EXPECT_EQ(next_probe({U, U, U, U, U, U, S}), 2u);  // between GOOD (-1) and 6: 2.5, the earlier on a tie
  EXPECT_EQ(next_probe({U, U, G, U, U, U, S}), 4u);
  EXPECT_EQ(next_probe({U, U, G, U, S, U, S}), 3u);
  EXPECT_EQ(next_probe({U, U, G, S, U, U, S}), kNoProbe);  // 2 good, 3 slower: decided
  EXPECT_EQ(next_probe({U, U, U}), kNoProbe);              // nothing slower yet: BAD untested
  // An undecided commit is stepped around: the untested one nearest the middle instead.
  EXPECT_EQ(next_probe({U, U, N, U, U, S}), 1u);
  EXPECT_EQ(next_probe({G, N, U, S}), 2u);
}

TEST(Bisect, FindsTheFirstSlowerCommitInLogSteps) {
  for (std::size_t n : {1u, 2u, 7u, 64u, 100u})
    for (std::size_t first = 0; first < n; ++first) {
      std::vector<Mark> truth(n, G);
      for (std::size_t i = first; i < n; ++i) truth[i] = S;
      std::size_t probes = 0;
      const auto s = search(truth, &probes);
      ASSERT_EQ(s.size(), 1u) << n << " " << first;
      EXPECT_EQ(s[0], first);
      std::size_t log2 = 0;
      while ((std::size_t{1} << log2) < n) ++log2;
      EXPECT_LE(probes, log2 + 2) << n << " " << first;  // BAD, then a halving per probe
    }
}

TEST(Bisect, UndecidedCommitsLeaveARangeNeverAGuess) {
  std::size_t probes = 0;
  // GOOD, N, S, S: the first SLOWER is the undecided one or the next.
  EXPECT_EQ(search({N, S, S}, &probes), (std::vector<std::size_t>{0, 1}));
  // An undecided commit away from the slowdown does not get in the way.
  EXPECT_EQ(search({G, N, G, G, S, S, S, S}, &probes), (std::vector<std::size_t>{4}));
  // Two undecided in a row before it: all three listed.
  EXPECT_EQ(search({G, G, N, N, S, S}, &probes), (std::vector<std::size_t>{2, 3, 4}));
  // Non-monotone marks: the range ends at the first SLOWER found, starts after the last good before it.
  EXPECT_EQ(suspects({G, S, G, S}), (std::vector<std::size_t>{1}));
  EXPECT_TRUE(suspects({G, G, G}).empty());
}
