// The ledger of device bytes (kernels/common/device_bytes.h): per owner and in all, peaks, resets,
// frees credited to the allocating owner. Plain bookkeeping: the "allocations" are host buffers'
// addresses (the ledger never dereferences them); cuda_util's device_alloc feeds it real ones.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/common/device_bytes.h"

using dlb::DeviceBytes;
using dlb::MemOwnerScope;

TEST(DeviceBytes, OwnersCountTheirOwnAndTheProcessCountsAll) {
  DeviceBytes d;
  std::vector<char> a(1), b(1), c(1);
  {
    const MemOwnerScope one(1);
    d.add(a.data(), 1000);
  }
  {
    const MemOwnerScope two(2);
    d.add(b.data(), 300);
    EXPECT_EQ(d.current(), 300u);  // its own, not owner 1's
    EXPECT_EQ(d.peak(), 300u);
  }
  d.add(c.data(), 5);  // owner 0: the process's only
  EXPECT_EQ(d.current(), 1305u);
  EXPECT_EQ(d.peak(), 1305u);
  const MemOwnerScope one(1);
  EXPECT_EQ(d.current(), 1000u);
  EXPECT_EQ(d.peak(), 1000u);
}

TEST(DeviceBytes, AFreeCreditsTheOwnerThatAllocatedWhereverItIsMade) {
  DeviceBytes d;
  std::vector<char> a(1);
  {
    const MemOwnerScope one(1);
    d.add(a.data(), 64);
  }
  {
    const MemOwnerScope two(2);
    d.remove(a.data());  // freed while owner 2 is in force
    EXPECT_EQ(d.current(), 0u);
  }
  EXPECT_EQ(d.current(), 0u);
  const MemOwnerScope one(1);
  EXPECT_EQ(d.current(), 0u);
  EXPECT_EQ(d.peak(), 64u);  // its high-water mark stays until reset
  d.reset_peak();
  EXPECT_EQ(d.peak(), 0u);
  d.remove(a.data());  // twice, or never added: ignored
  EXPECT_EQ(d.current(), 0u);
}

TEST(DeviceBytes, PeakIsTheHighWaterMarkSinceTheOwnersLastReset) {
  DeviceBytes d;
  std::vector<char> a(1), b(1), other(1);
  const MemOwnerScope one(7);
  d.add(a.data(), 400);
  d.add(b.data(), 200);
  d.remove(a.data());
  EXPECT_EQ(d.current(), 200u);
  EXPECT_EQ(d.peak(), 600u);  // both were held at once
  {
    const MemOwnerScope two(8);  // another owner's allocation and reset touch neither figure of 7's
    d.add(other.data(), 10000);
    d.reset_peak();
  }
  EXPECT_EQ(d.peak(), 600u);
  d.reset_peak();
  EXPECT_EQ(d.peak(), 200u);  // what it still holds
  {
    const MemOwnerScope none(0);
    EXPECT_EQ(d.current(), 10200u);
    EXPECT_EQ(d.peak(), 10200u);  // the process's (400 was freed before the 10000 came)
  }
}

TEST(DeviceBytes, ScopesNestAndRestore) {
  EXPECT_EQ(dlb::mem_owner(), 0);
  {
    const MemOwnerScope a(3);
    {
      const MemOwnerScope b(4);
      EXPECT_EQ(dlb::mem_owner(), 4);
    }
    EXPECT_EQ(dlb::mem_owner(), 3);
  }
  EXPECT_EQ(dlb::mem_owner(), 0);
}
