// Sweep lists and suite axes: what --sizes/--batch accept and reject.
#include <gtest/gtest.h>

#include "harness/sweep.h"
#include "kernels/common/errors.h"

using dlb::UsageError;
using dlb::harness::parse_list;

TEST(Sweep, PlainList) { EXPECT_EQ(parse_list("512,2048", "--sizes"), (std::vector<long long>{512, 2048})); }

TEST(Sweep, SpacesAreTrimmed) { EXPECT_EQ(parse_list(" 64, 4 ,2", "--batch"), (std::vector<long long>{64, 4, 2})); }

TEST(Sweep, RejectsZeroNegativeJunkEmpty) {
  EXPECT_THROW(parse_list("0", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("-1", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("abc", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("12x", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("1,,2", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("", "--sizes"), UsageError);
}

TEST(Sweep, RejectsOverflow) {
  EXPECT_THROW(parse_list("99999999999999999999", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("90000000TB", "--sizes", true), UsageError);
}

TEST(Sweep, Units) {
  EXPECT_EQ(parse_list("1MB,256KiB,1GiB,7", "--sizes", true),
            (std::vector<long long>{1000000, 262144, 1LL << 30, 7}));
  EXPECT_THROW(parse_list("1MB", "--sizes", false), UsageError);
  EXPECT_THROW(parse_list("1XB", "--sizes", true), UsageError);
  EXPECT_THROW(parse_list("-1MB", "--sizes", true), UsageError);
}

TEST(Sweep, MaxValue) {
  EXPECT_NO_THROW(parse_list("1024", "--batch", false, 1024));
  EXPECT_THROW(parse_list("1025", "--batch", false, 1024), UsageError);
}

TEST(Sweep, MessageNamesFlagAndValue) {
  try {
    parse_list("5,-3", "--batch");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--batch"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("-3"), std::string::npos);
  }
}

TEST(Sweep, SuiteAxesQuickAndOverrides) {
  auto full = dlb::harness::suite_axes("matmul", false, nlohmann::json::object());
  auto quick = dlb::harness::suite_axes("matmul", true, nlohmann::json::object());
  ASSERT_TRUE(full.contains("size"));
  EXPECT_GT(full["size"].size(), quick["size"].size());
  auto over = dlb::harness::suite_axes("matmul", true, {{"size", {77}}});
  EXPECT_EQ(over["size"], nlohmann::json::array({77}));
}
