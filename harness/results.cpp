// Results writer and loader (see results.h).
#include "harness/results.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/sweep.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;

namespace dlb::harness {

ResultsWriter::ResultsWriter(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw UsageError("--out " + dir_ + ": cannot create the folder (" + (ec ? ec.message() : std::string("not a folder")) + ")");
  const std::string p = dir_ + "/results.jsonl";
  jsonl_ = std::fopen(p.c_str(), "w");
  if (!jsonl_) throw UsageError("--out " + dir_ + ": cannot write " + p + " (" + std::strerror(errno) + ")");
}

ResultsWriter::~ResultsWriter() {
  if (jsonl_) std::fclose(jsonl_);
}

void ResultsWriter::append(const std::vector<nlohmann::json>& entries) {
  for (const auto& e : entries) {
    const std::string line = e.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), jsonl_);
    entries_.push_back(e);
  }
  std::fflush(jsonl_);
  fsync(fileno(jsonl_));
}

void ResultsWriter::write_json(const nlohmann::json& context) const {
  nlohmann::json doc = {{"context", context}, {"benchmarks", entries_}};
  const std::string tmp = dir_ + "/.results.json.tmp", dst = dir_ + "/results.json";
  {
    std::ofstream f(tmp);
    f << doc.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, dst);
}

std::uint64_t max_input_bytes() {
  const char* v = std::getenv("DLBENCH_MAX_INPUT_MB");
  if (!v) return 256ull << 20;
  return static_cast<std::uint64_t>(parse_int(v, "DLBENCH_MAX_INPUT_MB", 1, 1 << 20)) << 20;
}

std::string read_input_file(const std::string& file) {
  const std::uint64_t cap = max_input_bytes();
  auto kind = [&](const struct stat& st) {
    if (S_ISDIR(st.st_mode)) throw InputError(file + ": is a folder, not a file");
    if (!S_ISREG(st.st_mode))
      throw InputError(file + ": not a regular file (" +
                       (S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device") +
                       "); give a results file");
    if (static_cast<std::uint64_t>(st.st_size) > cap)
      throw InputError(file + ": " + std::to_string(st.st_size >> 20) + " MiB is over the input cap of " +
                       std::to_string(cap >> 20) + " MiB (DLBENCH_MAX_INPUT_MB)");
  };
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw InputError(file + ": cannot be read (" + std::strerror(errno) + ")");
  kind(st);
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw InputError(file + ": cannot be read (" + std::strerror(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) throw InputError(file + ": cannot be read (" + std::strerror(errno) + ")");
  kind(st);  // the path may have been swapped between stat and open
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > cap) throw InputError(file + ": grew over the input cap of " + std::to_string(cap >> 20) + " MiB while read");
      text.resize(text.size() + 65536);
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(file + ": cannot be read (" + std::strerror(errno) + ")");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

void check_results_input(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = path + "/results.json";
    if (!fs::exists(file, ec)) file = path + "/results.jsonl";
    if (!fs::exists(file, ec)) return;  // the reader says what is missing
  } else if (!fs::exists(path, ec)) {
    return;
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) <= max_input_bytes())
    return;
  read_input_file(file);  // throws the InputError that names what is wrong
}

namespace {
// Field types and times of a loaded results document; throws InputError naming the file and entry.
void check_results(const nlohmann::json& doc, const std::string& file) {
  using json = nlohmann::json;
  const json& ctx = doc.at("context");
  if (!ctx.is_object()) throw InputError(file + ": \"context\" is not an object (not a results file)");
  if (ctx.contains("git")) {
    const json& git = ctx["git"];
    if (!git.is_object()) throw InputError(file + ": context.git is not an object");
    if (git.contains("dirty") && !git["dirty"].is_boolean()) throw InputError(file + ": context.git.dirty is not true or false");
    if (git.contains("sha") && !git["sha"].is_string()) throw InputError(file + ": context.git.sha is not a string");
  }
  const json& entries = doc.at("benchmarks");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    std::string where = file + ": benchmark entry " + std::to_string(i + 1);
    if (!e.is_object()) throw InputError(where + " is not an object (not a results file)");
    if (e.contains("name") && e["name"].is_string()) where += " ('" + e["name"].get<std::string>() + "')";
    for (const char* k : {"name", "run_name", "run_type", "aggregate_name", "aggregate_unit", "time_unit",
                          "error_message", "suite", "op", "device", "dtype"})
      if (e.contains(k) && !e[k].is_string()) throw InputError(where + ": \"" + k + "\" is not a string");
    for (const char* k : {"error_occurred", "verified"})
      if (e.contains(k) && !e[k].is_boolean()) throw InputError(where + ": \"" + k + "\" is not true or false");
    for (const char* k : {"real_time", "cpu_time", "iterations", "repetitions", "repetition_index", "max_rel_err",
                          "tolerance", "gflops", "gb_per_s", "imgs_per_s", "pct_of_peak"})
      if (e.contains(k) && !e[k].is_number()) throw InputError(where + ": \"" + k + "\" is not a number");
    if (e.contains("time_unit")) {
      const std::string u = e["time_unit"].get<std::string>();
      if (u != "ns" && u != "us" && u != "ms" && u != "s")
        throw InputError(where + ": time_unit '" + u + "' is not ns, us, ms or s");
    }
    if (e.contains("error_occurred") && e["error_occurred"] == true) continue;  // failed cases carry no time
    const std::string run_type = e.value("run_type", "iteration"), agg = e.value("aggregate_name", "");
    // A timed repetition, mean or median takes time; stddev and cv may be 0, never negative.
    const bool positive = run_type != "aggregate" || agg == "mean" || agg == "median" || agg.empty();
    for (const char* k : {"real_time", "cpu_time"}) {
      if (!e.contains(k)) continue;
      const double t = e[k].get<double>();
      const bool must_be_positive = positive && std::string(k) == "real_time";
      if (!std::isfinite(t) || t < 0 || (must_be_positive && t == 0))
        throw InputError(where + ": " + k + " is " + e[k].dump() + " (a timed entry needs a positive, finite time)");
    }
  }
}
}  // namespace

nlohmann::json load_results(const std::string& path) {
  std::string file = path;
  std::error_code ec;  // a symlink loop or an unreadable folder is bad input too, not an exception
  if (fs::is_directory(path, ec)) {
    file = path + "/results.json";
    if (!fs::exists(file, ec) && fs::exists(path + "/results.jsonl", ec)) file = path + "/results.jsonl";
    if (!fs::exists(file, ec)) throw InputError(path + ": no results.json or results.jsonl in this folder");
  } else if (!fs::exists(path, ec)) {
    throw InputError(path + ": " + (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file or folder"));
  }
  const std::string text = read_input_file(file);
  if (text.empty()) throw InputError(file + ": empty file");
  if (file.size() >= 6 && file.substr(file.size() - 6) == ".jsonl") {
    nlohmann::json doc = {{"context", nlohmann::json::object()}, {"benchmarks", nlohmann::json::array()}};
    std::istringstream lines(text);
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      ++n;
      if (line.empty()) continue;
      auto e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_discarded() || !e.is_object())
        throw InputError(file + ": line " + std::to_string(n) + " is not a JSON object (truncated or foreign file)");
      doc["benchmarks"].push_back(e);
    }
    check_results(doc, file);
    return doc;
  }
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw InputError(file + ": not valid JSON (truncated or binary file)");
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc.at("benchmarks").is_array())
    throw InputError(file + ": not a results file (no \"benchmarks\" array)");
  if (!doc.contains("context")) doc["context"] = nlohmann::json::object();
  check_results(doc, file);
  return doc;
}

}  // namespace dlb::harness
