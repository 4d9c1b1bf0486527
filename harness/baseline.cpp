// Baselines per machine (see baseline.h).
#include "harness/baseline.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "harness/compare.h"
#include "harness/results.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace fs = std::filesystem;

namespace dlb::harness {

using json = nlohmann::json;

namespace {

// key.txt: through the one safe reader (a FIFO, device or huge file is refused, never waited on).
std::string read_first_line(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return "";
  const std::string text = read_file_safely(p.string(), 64 << 10);
  return text.substr(0, text.find('\n'));
}

// Atomic: a check running at the same time sees the old or the new file; a full disk or `ulimit -f`
// leaves neither a half-written file nor a temporary one.
void write_file(const fs::path& dst, const std::string& text) {
  try {
    write_file_atomically(dst.string(), text);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--dir: ") + e.what());
  }
}

}  // namespace

std::string baseline_key(const json& doc, const std::string& label) {
  const std::string key = machine_key_or_empty(doc);
  if (key.empty())
    throw InputError(label + ": no machine fingerprint in its context (a results.jsonl alone?); cannot key a baseline");
  const json& ctx = doc["context"];
  auto count = [&](const char* obj, const char* field) -> long long {
    if (!ctx.contains(obj) || !ctx[obj].is_object() || !ctx[obj].contains(field)) return -1;
    const json& v = ctx[obj][field];
    return v.is_number_integer() ? v.get<long long>() : -1;
  };
  std::string k = key;
  if (const long long n = count("cpu", "logical_cores"); n >= 0) k += " | " + std::to_string(n) + " cores";
  if (const long long n = count("openblas", "threads"); n >= 0) k += " | OpenBLAS " + std::to_string(n) + " threads";
  if (const long long n = count("cpu", "kernel_threads"); n >= 0) k += " | " + std::to_string(n) + " kernel threads";
  return k;
}

namespace {
std::vector<std::string> key_parts(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (true) {
    const std::size_t bar = key.find(" | ", at);
    parts.push_back(key.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) return parts;
    at = bar + 3;
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? std::string("nothing") : s;
}
}  // namespace

std::string nearest_baseline_difference(const std::string& dir, const std::string& key) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  const auto mine = key_parts(key);
  std::string best_folder, best_key;
  long best = -1;
  for (const auto& ent : fs::directory_iterator(dir, ec)) {
    if (!ent.is_directory(ec)) continue;
    const std::string other = read_first_line(ent.path() / "key.txt");
    if (other.empty()) continue;
    long shared = 0;
    for (const auto& p : key_parts(other))
      for (const auto& q : mine) shared += p == q;
    if (shared > best || (shared == best && ent.path().string() < best_folder))
      best = shared, best_folder = ent.path().string(), best_key = other;
  }
  if (best < 0) return "";
  std::vector<std::string> theirs_only, mine_only;
  const auto theirs = key_parts(best_key);
  for (const auto& p : theirs)
    if (std::find(mine.begin(), mine.end(), p) == mine.end()) theirs_only.push_back(p);
  for (const auto& p : mine)
    if (std::find(theirs.begin(), theirs.end(), p) == theirs.end()) mine_only.push_back(p);
  return best_folder + " has " + join(theirs_only) + " (this run: " + join(mine_only) + ")";
}

std::string baseline_slug(const std::string& key) {
  std::string s;
  for (unsigned char ch : key) {
    if (std::isalnum(ch)) s += static_cast<char>(std::tolower(ch));
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  if (s.size() > 60) s.resize(60);
  while (!s.empty() && s.back() == '-') s.pop_back();
  std::uint32_t h = 2166136261u;  // FNV-1a, 32 bits
  for (unsigned char ch : key) h = (h ^ ch) * 16777619u;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return (s.empty() ? std::string("machine") : s) + "-" + hex;
}

std::string save_baseline(const json& doc, const std::string& key, const std::string& dir, std::string* replaced) {
  const fs::path folder = fs::path(dir) / baseline_slug(key);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec || !fs::is_directory(folder))
    throw UsageError("--dir " + dir + ": cannot create " + folder.string() + (ec ? " (" + ec.message() + ")" : ""));
  if (replaced) {
    replaced->clear();
    if (fs::exists(folder / "results.json")) {
      try {
        *replaced = describe_run(load_results((folder / "results.json").string()));
      } catch (const std::exception&) {
        *replaced = "an unreadable file";
      }
    }
  }
  write_file(folder / "results.json", doc.dump(2) + "\n");
  write_file(folder / "key.txt", key + "\n");
  return folder.string();
}

std::optional<std::string> find_baseline(const std::string& dir, const std::string& key) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  const fs::path direct = fs::path(dir) / baseline_slug(key);
  if (read_first_line(direct / "key.txt") == key && fs::exists(direct / "results.json")) return direct.string();
  for (const auto& ent : fs::directory_iterator(dir, ec)) {
    if (!ent.is_directory()) continue;
    if (read_first_line(ent.path() / "key.txt") == key && fs::exists(ent.path() / "results.json"))
      return ent.path().string();
  }
  return std::nullopt;
}

}  // namespace dlb::harness
