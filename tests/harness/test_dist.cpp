// Suite dist's arithmetic: nccl-tests' busbw factors, per-rank element counts, the --sizes sweep.
#include <gtest/gtest.h>

#include "harness/dist.h"
#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"

using dlb::comm::Op;

TEST(Dist, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::reduce_scatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::broadcast, 1), 1.0);
  EXPECT_DOUBLE_EQ(dlb::comm::busbw_factor(Op::broadcast, 16), 1.0);
}

TEST(Dist, PerRankCounts) {
  // count = the whole array: all-gather sends count/n, reduce-scatter receives count/n.
  EXPECT_EQ(dlb::comm::input_count(Op::all_gather, 12, 4), 3u);
  EXPECT_EQ(dlb::comm::output_count(Op::all_gather, 12, 4), 12u);
  EXPECT_EQ(dlb::comm::input_count(Op::reduce_scatter, 12, 4), 12u);
  EXPECT_EQ(dlb::comm::output_count(Op::reduce_scatter, 12, 4), 3u);
  EXPECT_EQ(dlb::comm::input_count(Op::all_reduce, 7, 3), 7u);
  EXPECT_EQ(dlb::comm::output_count(Op::broadcast, 7, 3), 7u);
}

TEST(Dist, OpNames) {
  for (Op op : {Op::all_reduce, Op::all_gather, Op::reduce_scatter, Op::broadcast})
    EXPECT_EQ(dlb::comm::parse_op(dlb::comm::op_name(op)), op);
  EXPECT_THROW(dlb::comm::parse_op("alltoall"), dlb::UsageError);
}

TEST(Dist, SizeSweepRangesDoubleLikeNcclTests) {
  using dlb::harness::parse_size_sweep;
  EXPECT_EQ(parse_size_sweep("8B..64B"), (std::vector<long long>{8, 16, 32, 64}));
  EXPECT_EQ(parse_size_sweep("8..100"), (std::vector<long long>{8, 16, 32, 64}));
  EXPECT_EQ(parse_size_sweep("1KiB..4KiB,7,1MB"), (std::vector<long long>{1024, 2048, 4096, 7, 1000000}));
  EXPECT_EQ(parse_size_sweep("8B..1GiB").size(), 28u);
  EXPECT_EQ(parse_size_sweep("8B..1GiB").back(), 1LL << 30);
  EXPECT_THROW(parse_size_sweep("64..8"), dlb::UsageError);
  EXPECT_THROW(parse_size_sweep("0..8"), dlb::UsageError);
  EXPECT_THROW(parse_size_sweep("8..x"), dlb::UsageError);
  EXPECT_THROW(parse_size_sweep("1TB"), dlb::UsageError);
}
