// NCCL on one rank (one GPU): each collective, out of place and in place, returns its input (a sum
// over one rank) at odd sizes, and times itself with CUDA events. Skips without a device. Multi-rank
// NCCL needs one GPU per rank (NCCL refuses two ranks on one GPU): run `dlbench run --suite dist
// --ranks N --device cuda` on a machine with N GPUs.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/comm/comm.h"
#include "tests/gpu_test.h"

using dlb::comm::Op;

TEST(NcclGpu, OneRankCollectivesReturnTheirInput) {
  SKIP_WITHOUT_GPU();
  ASSERT_TRUE(dlb::comm::nccl_available());
  EXPECT_FALSE(dlb::comm::nccl_version().empty());
  ASSERT_EQ(dlb::comm::world().size, 1);
  for (Op op : {Op::all_reduce, Op::all_gather, Op::reduce_scatter, Op::broadcast})
    for (bool inplace : {false, true})
      for (std::size_t count : {std::size_t(1), std::size_t(1025), std::size_t(1) << 20}) {
        auto c = dlb::comm::make_nccl_collective(op, count, inplace, 0);
        std::vector<float> in(dlb::comm::input_count(op, count, 1));
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 17) - 8);
        c->load(in);
        EXPECT_GE(c->run(1), 0.0);
        const auto out = c->output();
        ASSERT_EQ(out.size(), in.size()) << dlb::comm::op_name(op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] != in[i];
        EXPECT_EQ(wrong, 0u) << dlb::comm::op_name(op) << " inplace=" << inplace << " count=" << count;
        // NCCL enqueues nothing for an in-place collective on one rank ("in-place is nop"): its event
        // pair reads 0 there, so only the out-of-place runs must take time.
        const double secs = c->run(3);
        if (inplace)
          EXPECT_GE(secs, 0.0);
        else
          EXPECT_GT(secs, 0.0) << dlb::comm::op_name(op) << " count=" << count;
      }
}
