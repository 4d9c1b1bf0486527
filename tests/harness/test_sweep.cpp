// Command-line lists and numbers: what --sizes/--batch accept and reject; --filter's bounds.
#include <gtest/gtest.h>

#include <algorithm>

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

// Issue 13: one decimal number parser for every numeric flag and environment variable.
TEST(Sweep, ParseIntDecimalOnly) {
  using dlb::harness::parse_int;
  EXPECT_EQ(parse_int("5", "--repetitions", 1, 1000), 5);
  EXPECT_EQ(parse_int("+7", "--epochs", 1, 10), 7);
  for (const char* bad : {"", "0x10", "010x", "3.5", "1e2", " 5", "5 ", "nan", "inf", "abc", "-", "0b1"})
    EXPECT_THROW(parse_int(bad, "--repetitions", 1, 1000), UsageError) << bad;
  EXPECT_THROW(parse_int("0", "--repetitions", 1, 1000), UsageError);
  EXPECT_THROW(parse_int("1001", "--repetitions", 1, 1000), UsageError);
  EXPECT_THROW(parse_int("99999999999999999999", "--limit", 0, 1LL << 40), UsageError);
  try {
    parse_int("3.5", "--repetitions", 1, 1000);
    FAIL();
  } catch (const UsageError& e) {  // names flag and value, and says what is wrong (not "not in range")
    const std::string m = e.what();
    EXPECT_NE(m.find("--repetitions '3.5'"), std::string::npos) << m;
    EXPECT_NE(m.find("not a whole number"), std::string::npos) << m;
  }
}

TEST(Sweep, ParseRealDecimalOnly) {
  using dlb::harness::parse_real;
  EXPECT_DOUBLE_EQ(parse_real("0.25", "--min-time", 1e-6, 3600), 0.25);
  EXPECT_DOUBLE_EQ(parse_real("1e-3", "--min-time", 1e-6, 3600), 1e-3);
  EXPECT_DOUBLE_EQ(parse_real(".5", "--lr", 1e-12, 1e3), 0.5);
  for (const char* bad : {"", "nan", "NaN", "inf", "-inf", "0x1p-3", "1s", "1e", ".", "1e999"})
    EXPECT_THROW(parse_real(bad, "--min-time", 1e-6, 3600), UsageError) << bad;
  EXPECT_THROW(parse_real("0", "--min-time", 1e-6, 3600), UsageError);
  EXPECT_THROW(parse_real("4000", "--min-time", 1e-6, 3600), UsageError);
}

TEST(Sweep, DuplicatesRefused) {
  EXPECT_THROW(parse_list("512,512", "--sizes"), UsageError);
  EXPECT_THROW(parse_list("1MB,1000KB", "--sizes", true), UsageError);  // the same number of bytes
  EXPECT_THROW(dlb::harness::parse_words("fp32,fp32", "--dtype"), UsageError);
  EXPECT_EQ(dlb::harness::parse_words("fp32,bf16", "--dtype").size(), 2u);
}

// --filter is bounded before std::regex sees it: 20,000 nested groups crashed the process (its
// compiler recurses per group); now each bound is a one-line UsageError, and filters people write pass.
TEST(Sweep, FilterPatternIsBounded) {
  using dlb::harness::compile_filter;
  const std::string deep = std::string(20000, '(') + "a" + std::string(20000, ')');
  auto message = [](const std::string& p) {
    try {
      compile_filter(p);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(deep).find("40001 characters; at most 1024"), std::string::npos) << message(deep);
  EXPECT_LT(message(deep).size(), 200u);  // the pattern is shortened in the line
  const std::string nested = std::string(17, '(') + "a" + std::string(17, ')');
  EXPECT_NE(message(nested).find("nested 17 deep"), std::string::npos) << message(nested);
  EXPECT_EQ(message(std::string(16, '(') + "a" + std::string(16, ')')), "accepted");
  EXPECT_NE(message("((a{100}){100}){100}").find("multiply"), std::string::npos);
  EXPECT_NE(message("a{1001,}").find("multiply"), std::string::npos);
  EXPECT_EQ(message("a{2,10}b{3}"), "accepted");
  EXPECT_EQ(message("[(((((((((((((((((((]x"), "accepted");  // parentheses in a class are literals
  EXPECT_EQ(message("\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(x"), "accepted");
  EXPECT_NE(message("(").find("not a valid regular expression"), std::string::npos);
  EXPECT_NE(message(std::string("a\nb(")).find("'a?b(': not a valid"), std::string::npos);  // one line
  EXPECT_THROW(compile_filter(""), UsageError);
  EXPECT_TRUE(std::regex_search("matmul/openblas/cpu/fp32/size=512", compile_filter("openblas/.*size=(256|512)$")));
}
