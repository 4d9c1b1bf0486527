// The command line's lists and numbers: --sizes 512,2048, --batch 64,4,2, sizes with units like 1MB
// or 256KiB, every numeric flag, and --filter's bounded regular expression.
#pragma once
#include <regex>
#include <string>
#include <vector>

namespace dlb::harness {

// "512,2048" -> {512, 2048}. A value listed twice is refused. Every value must be a positive integer that fits in 63 bits (and
// <= `max_value` when given); with `allow_units`, a suffix B, KB, MB, GB, TB (powers of 1000) or
// KiB, MiB, GiB, TiB (powers of 1024) is accepted. Throws UsageError naming `flag` and the value.
std::vector<long long> parse_list(const std::string& text, const std::string& flag, bool allow_units = false,
                                  long long max_value = 0);
std::vector<std::string> parse_words(const std::string& text, const std::string& flag);

// The one number parser of every numeric flag and environment variable: decimal only (no hex, octal,
// inf or nan, no units, no spaces), inside [lo, hi]. Throws UsageError naming `flag` and the text.
long long parse_int(const std::string& text, const std::string& flag, long long lo, long long hi);
double parse_real(const std::string& text, const std::string& flag, double lo, double hi);

// The one compiler of --filter (run, list, dist): a regular expression (ECMAScript) bounded before
// std::regex sees it, since its compiler and matcher recurse per group and per repetition (20,000
// nested groups overflow the stack): at most kFilterMaxChars characters, groups nested at most
// kFilterMaxDepth deep, and {n,m} counts whose product is at most kFilterMaxRepeat. Throws
// UsageError (one line, the pattern shortened) for an empty, oversized or invalid pattern.
constexpr std::size_t kFilterMaxChars = 1024;
constexpr int kFilterMaxDepth = 16;
constexpr long long kFilterMaxRepeat = 1000;
std::regex compile_filter(const std::string& pattern);

}  // namespace dlb::harness
