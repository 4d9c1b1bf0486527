// Command-line lists, numbers and --filter (see sweep.h).
#include "harness/sweep.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <map>

#include "kernels/common/errors.h"

namespace dlb::harness {

namespace {
std::string trim(const std::string& s) {
  std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    out.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

long long unit_multiplier(std::string u) {
  for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u.empty() || u == "B") return 1;
  if (u == "K" || u == "KB") return 1000LL;
  if (u == "M" || u == "MB") return 1000LL * 1000;
  if (u == "G" || u == "GB") return 1000LL * 1000 * 1000;
  if (u == "T" || u == "TB") return 1000LL * 1000 * 1000 * 1000;
  if (u == "KIB") return 1LL << 10;
  if (u == "MIB") return 1LL << 20;
  if (u == "GIB") return 1LL << 30;
  if (u == "TIB") return 1LL << 40;
  return 0;
}
}  // namespace

std::vector<long long> parse_list(const std::string& text, const std::string& flag, bool allow_units,
                                  long long max_value) {
  std::vector<long long> out;
  for (const std::string& item : split(text)) {
    auto bad = [&](const std::string& why) {
      return UsageError(flag + ": '" + item + "' " + why);
    };
    if (item.empty()) throw UsageError(flag + ": empty value in '" + text + "'");
    if (item[0] == '-') throw bad("is negative (values must be positive integers)");
    std::size_t i = 0;
    if (item[0] == '+') ++i;
    long long v = 0;
    std::size_t digits = 0;
    for (; i < item.size() && std::isdigit(static_cast<unsigned char>(item[i])); ++i, ++digits) {
      const int d = item[i] - '0';
      if (v > (LLONG_MAX - d) / 10) throw bad("is too large");
      v = v * 10 + d;
    }
    if (digits == 0) throw bad("is not a number");
    const std::string unit = item.substr(i);
    long long mult = 1;
    if (!unit.empty()) {
      mult = allow_units ? unit_multiplier(unit) : 0;
      if (mult == 0)
        throw bad(allow_units ? "has an unknown unit (use B, KB, MB, GB, KiB, MiB, GiB)" : "is not an integer");
    }
    if (v > LLONG_MAX / mult) throw bad("is too large");
    v *= mult;
    if (v == 0) throw bad("must be positive");
    if (max_value > 0 && v > max_value) throw bad("is too large (at most " + std::to_string(max_value) + ")");
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw UsageError(flag + ": '" + item + "' is listed twice in '" + text + "' (" + std::to_string(v) + ")");
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> parse_words(const std::string& text, const std::string& flag) {
  std::vector<std::string> out;
  for (const std::string& w : split(text)) {
    if (w.empty()) throw UsageError(flag + ": empty value in '" + text + "'");
    if (std::find(out.begin(), out.end(), w) != out.end())
      throw UsageError(flag + ": '" + w + "' is listed twice in '" + text + "'");
    out.push_back(w);
  }
  return out;
}

namespace {
// Decimal syntax: [+-]digits[.digits][e[+-]digits] (or .digits); `integer` allows digits only.
bool decimal_syntax(const std::string& t, bool integer) {
  std::size_t i = 0, n = t.size();
  if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
  std::size_t digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++digits;
  if (!integer && i < n && t[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (!integer && i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
    std::size_t exp = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(t[i]))) ++i, ++exp;
    if (exp == 0) return false;
  }
  return i == n;
}

std::string fmt_bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

long long parse_int(const std::string& text, const std::string& flag, long long lo, long long hi) {
  const std::string range = " (expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  if (text.empty()) throw UsageError(flag + ": empty value" + range);
  if (!decimal_syntax(text, true)) {
    const bool real = decimal_syntax(text, false);
    throw UsageError(flag + " '" + text + "': " + (real ? "not a whole number" : "not a decimal number") + range);
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || v < lo || v > hi) throw UsageError(flag + " '" + text + "': out of range" + range);
  return v;
}

double parse_real(const std::string& text, const std::string& flag, double lo, double hi) {
  const std::string range = " (expected a decimal number from " + fmt_bound(lo) + " to " + fmt_bound(hi) + ")";
  if (text.empty()) throw UsageError(flag + ": empty value" + range);
  if (!decimal_syntax(text, false)) throw UsageError(flag + " '" + text + "': not a decimal number" + range);
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v) || v < lo || v > hi) throw UsageError(flag + " '" + text + "': out of range" + range);
  return v;
}

std::regex compile_filter(const std::string& pattern) {
  // The pattern as the error line shows it: printable, at most 40 characters.
  std::string shown;
  for (std::size_t i = 0; i < pattern.size() && i < 40; ++i)
    shown += std::isprint(static_cast<unsigned char>(pattern[i])) ? pattern[i] : '?';
  if (pattern.size() > 40) shown += "...";
  const std::string bad = "--filter '" + shown + "': ";
  if (pattern.empty()) throw UsageError("--filter: empty regular expression");
  if (pattern.size() > kFilterMaxChars)
    throw UsageError(bad + std::to_string(pattern.size()) + " characters; at most " + std::to_string(kFilterMaxChars));
  int depth = 0, deepest = 0;
  long long repeat = 1;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;  // an escaped character is a literal
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')') {
      depth = std::max(0, depth - 1);
    } else if (c == '{') {  // {n}, {n,} or {n,m}: the states it expands to multiply (by m, else n)
      long long lo = 0, hi = -1;
      std::size_t j = i + 1;
      auto digits = [&](long long& v) {
        for (v = 0; j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j])); ++j)
          v = std::min(v * 10 + (pattern[j] - '0'), kFilterMaxRepeat + 1);
      };
      digits(lo);
      if (j < pattern.size() && pattern[j] == ',') {
        ++j;
        if (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) digits(hi);
      }
      if (j < pattern.size() && pattern[j] == '}')
        repeat = std::min(repeat * std::max(hi >= 0 ? hi : lo, 1LL), kFilterMaxRepeat + 1);
    }
  }
  if (deepest > kFilterMaxDepth)
    throw UsageError(bad + "groups nested " + std::to_string(deepest) + " deep; at most " + std::to_string(kFilterMaxDepth));
  if (repeat > kFilterMaxRepeat)
    throw UsageError(bad + "{n,m} repetition counts multiply to more than " + std::to_string(kFilterMaxRepeat));
  try {
    return std::regex(pattern);
  } catch (const std::regex_error&) {
    throw UsageError(bad + "not a valid regular expression");
  }
}

}  // namespace dlb::harness
