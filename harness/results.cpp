// Results writer and loader (see results.h).
#include "harness/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/sweep.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace fs = std::filesystem;

namespace dlb::harness {

namespace {

// results/<YYYYmmdd-HHMMSS>-<host>, or -2, -3... when a run started in the same second already made it:
// mkdir fails on an existing folder, so two runs never share one.
std::string make_default_dir() {
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t t = std::time(nullptr);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::localtime(&t));
  std::error_code ec;
  fs::create_directories("results", ec);
  const std::string base = std::string("results/") + ts + "-" + host;
  for (int i = 1; i < 10000; ++i) {
    const std::string d = i == 1 ? base : base + "-" + std::to_string(i);
    if (::mkdir(d.c_str(), 0777) == 0) return d;
    if (errno != EEXIST) throw UsageError("cannot create the results folder " + d + " (" + std::strerror(errno) + ")");
  }
  throw UsageError("cannot create a results folder " + base + "-N: all names taken");
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return ts;
}

// Removes DIR/report or DIR/traces of an earlier run: only a real folder (not a link) holding nothing
// but what dlbench writes there (files and folders of files, no links), so a user's own folder stays.
void remove_made_folder(const std::string& d) {
  struct stat st {};
  if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(d, fs::directory_options::none, ec), end; !ec && it != end; it.increment(ec)) {
    const auto s = it->symlink_status(ec);
    if (ec || !(fs::is_regular_file(s) || fs::is_directory(s))) return;
  }
  if (!ec) fs::remove_all(d, ec);
}

}  // namespace

ResultsWriter::ResultsWriter(std::string dir, OutMode mode) : dir_(std::move(dir)) {
  const std::string flag = mode == OutMode::resume ? "--resume " : "--out ";
  if (mode == OutMode::resume) {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) throw UsageError(flag + dir_ + ": " + (fs::exists(dir_, ec) ? "not a folder" : "no such folder"));
  } else if (dir_.empty()) {
    dir_ = make_default_dir();
  } else {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec || !fs::is_directory(dir_)) throw UsageError("--out " + dir_ + ": cannot create the folder (" + (ec ? ec.message() : std::string("not a folder")) + ")");
  }
  // The lock: held while this process lives; the file says who holds it. Never a link or a FIFO
  // (O_NOFOLLOW, O_NONBLOCK, then fstat): writing the holder into it must not write anywhere else.
  const std::string lock = dir_ + "/.dlbench.lock";
  auto open_lock = [&](int extra) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | extra, 0644);
    if (fd < 0)
      throw UsageError(flag + dir_ + ": cannot open " + lock + " (" +
                       (errno == ELOOP ? std::string("a symbolic link; remove it") : std::strerror(errno)) + ")");
    struct stat st {};
    std::string why;
    if (::fstat(fd, &st) != 0) why = std::strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = "not a regular file; remove it";
    else if (st.st_uid != ::geteuid()) why = "owned by user " + std::to_string(st.st_uid) + ", not by this user";
    if (!why.empty()) {
      ::close(fd);
      throw UsageError(flag + dir_ + ": refusing the lock file " + lock + " (" + why + ")");
    }
    return fd;
  };
  lock_ = open_lock(0);
  auto busy = [&]() {
    char buf[256] = {0};
    const ssize_t n = ::pread(lock_, buf, sizeof buf - 1, 0);
    std::string who = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "unknown holder";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(lock_);
    lock_ = -1;
    throw UsageError(flag + dir_ + ": in use by another dlbench run (" + who + ")");
  };
  if (::flock(lock_, LOCK_EX | LOCK_NB) != 0) busy();
  struct stat lst {};
  if (::fstat(lock_, &lst) == 0 && lst.st_nlink > 1) {
    // Hard-linked (a `cp -al` snapshot shares it): a lock of our own, so the snapshot's stays as it is.
    const int old = lock_;
    ::unlink(lock.c_str());
    try {
      lock_ = open_lock(O_EXCL);
    } catch (...) {
      ::close(old);
      throw;
    }
    ::close(old);
    if (::flock(lock_, LOCK_EX | LOCK_NB) != 0) busy();
  }
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  const std::string who = "pid " + std::to_string(::getpid()) + " on " + host + ", started " + now_utc() + "\n";
  if (::ftruncate(lock_, 0) == 0) (void)!::pwrite(lock_, who.data(), who.size(), 0);
  try {
    open_results(mode);
  } catch (...) {  // no destructor runs for a constructor that throws: release the lock here
    if (jsonl_ >= 0) ::close(jsonl_);
    ::close(lock_);
    throw;
  }
}

void ResultsWriter::open_results(OutMode mode) {
  const std::string js = dir_ + "/results.json", jl = dir_ + "/results.jsonl";
  std::error_code ec;
  struct stat st {};
  const bool has = ::lstat(js.c_str(), &st) == 0 || ::lstat(jl.c_str(), &st) == 0;
  if (mode == OutMode::fresh && has)
    throw UsageError("--out " + dir_ + ": already holds results; use --resume " + dir_ + " to finish that run or --force to replace it");
  // results.jsonl is never written through: the records kept (resume) or none (new, --force) go to a
  // new file of ours, renamed over the old name. A hard link (`cp -al` snapshot) or symlink at that
  // name keeps the old bytes; we append only to the file we made.
  std::string kept;
  if (mode == OutMode::resume) {
    if (::lstat(jl.c_str(), &st) != 0) throw UsageError("--resume " + dir_ + ": no results.jsonl there, nothing to resume");
    kept = read_back();
  } else {
    fs::remove(js, ec);  // --force: the old run's summary goes with its records (unlinked, never truncated)
    for (const char* made : {"report", "traces"}) remove_made_folder(dir_ + "/" + made);
  }
  std::string tmp;
  try {
    jsonl_ = create_temp_beside(jl, &tmp);
  } catch (const std::exception& e) {
    throw UsageError("--out " + dir_ + ": " + e.what());
  }
  int err = 0;
  if (!write_all_fd(jsonl_, kept)) err = errno;
  else if (::fsync(jsonl_) != 0 && errno != EINVAL) err = errno;
  else if (::rename(tmp.c_str(), jl.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw UsageError("--out " + dir_ + ": " + write_failure(jl, err));
  }
}

ResultsWriter::~ResultsWriter() {
  if (jsonl_ >= 0) ::close(jsonl_);
  if (lock_ >= 0) ::close(lock_);  // releases the flock
}

std::string ResultsWriter::read_back() {
  const std::string jl = dir_ + "/results.jsonl";
  const std::string text = read_input_file(jl);
  std::size_t pos = 0, good = 0;
  int n = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    ++n;
    auto e = parse_json_bounded(line, jl + ": line " + std::to_string(n));
    if (nl == std::string::npos && (e.is_discarded() || !e.is_object())) break;  // cut off mid-write: dropped
    if (!line.empty()) {
      if (e.is_discarded() || !e.is_object())
        throw InputError(jl + ": line " + std::to_string(n) + " is not a JSON object; cannot resume from it");
      if (n == 1 && e.contains(kRunHeaderKey)) header_ = e.at(kRunHeaderKey);
      else entries_.push_back(std::move(e));
    }
    pos = nl == std::string::npos ? text.size() : nl + 1;
    good = pos;
  }
  if (!header_.is_object() && entries_.empty()) return "";  // died before its header was complete: nothing done
  if (!header_.is_object())
    throw UsageError("--resume " + dir_ + ": results.jsonl has no run header (an older dlbench wrote it); cannot tell what was planned");
  std::string kept = text.substr(0, good);
  if (!kept.empty() && kept.back() != '\n') kept += '\n';  // a complete last line without its newline
  return kept;
}

void ResultsWriter::write_header(const nlohmann::json& run) {
  if (!write_all_fd(jsonl_, nlohmann::json{{kRunHeaderKey, run}}.dump() + "\n"))
    throw std::runtime_error(write_failure(dir_ + "/results.jsonl", errno));
  ::fsync(jsonl_);
}

void ResultsWriter::append(const std::vector<nlohmann::json>& entries) {
  std::string lines;  // one write for the whole case: a kill leaves all of its lines or none
  for (const auto& e : entries) {
    lines += e.dump() + "\n";
    entries_.push_back(e);
  }
  if (!write_all_fd(jsonl_, lines))
    throw std::runtime_error(write_failure(dir_ + "/results.jsonl", errno));
  ::fsync(jsonl_);
}

void ResultsWriter::write_json(const nlohmann::json& context) const {
  nlohmann::json doc = {{"context", context}, {"benchmarks", entries_}};
  write_file_atomically(dir_ + "/results.json", doc.dump(2) + "\n");
}

std::string RunState::describe() const {
  std::string s = state;
  if (planned > 0) s += ", " + std::to_string(done) + " of " + std::to_string(planned) + " cases";
  return s;
}

RunState run_state(const nlohmann::json& doc) {
  RunState r;
  std::set<std::string> names;
  if (doc.contains("benchmarks") && doc.at("benchmarks").is_array())
    for (const auto& e : doc.at("benchmarks"))
      if (e.is_object()) {
        const auto it = e.find("run_name");
        if (it != e.end() && it->is_string()) names.insert(it->get<std::string>());
        else if (e.contains("name") && e.at("name").is_string()) names.insert(e.at("name").get<std::string>());
      }
  r.done = names.size();
  const nlohmann::json* run = nullptr;
  if (doc.contains("context") && doc.at("context").is_object() && doc.at("context").contains("run") &&
      doc.at("context").at("run").is_object())
    run = &doc.at("context").at("run");
  if (!run) return r;
  if (run->contains("planned") && run->at("planned").is_array()) r.planned = run->at("planned").size();
  else if (run->contains("cases") && run->at("cases").is_number_unsigned()) r.planned = run->at("cases").get<std::size_t>();
  const std::string st = run->contains("state") && run->at("state").is_string() ? run->at("state").get<std::string>() : "";
  const bool marked = run->contains("interrupted") && run->at("interrupted").is_boolean() && run->at("interrupted").get<bool>();
  if (st == "interrupted" || (st.empty() && marked)) r.state = "interrupted";
  else if (r.planned > 0 && r.done < r.planned) r.state = "incomplete";
  else if (st == "running") r.state = "incomplete";
  return r;
}

std::uint64_t max_input_bytes() {
  const char* v = std::getenv("DLBENCH_MAX_INPUT_MB");
  if (!v) return 256ull << 20;
  return static_cast<std::uint64_t>(parse_int(v, "DLBENCH_MAX_INPUT_MB", 1, 1 << 20)) << 20;
}

std::string read_input_file(const std::string& file) {
  const std::uint64_t cap = max_input_bytes();
  try {
    return read_file_safely(file, cap);
  } catch (const InputError& e) {
    const std::string m = e.what();
    if (m.find(" cap of ") != std::string::npos) throw InputError(m + " (DLBENCH_MAX_INPUT_MB)");
    throw;
  }
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
                          "tolerance", "gflops", "gb_per_s", "imgs_per_s", "tokens_per_s", "pct_of_peak"})
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
      auto e = parse_json_bounded(line, file + ": line " + std::to_string(n));
      if (e.is_discarded() || !e.is_object())
        throw InputError(file + ": line " + std::to_string(n) + " is not a JSON object (truncated or foreign file)");
      if (e.contains(kRunHeaderKey)) {  // the run header: planned cases and options, not an entry
        if (e.at(kRunHeaderKey).is_object()) doc["context"]["run"] = e.at(kRunHeaderKey);
        continue;
      }
      doc["benchmarks"].push_back(e);
    }
    check_results(doc, file);
    return doc;
  }
  auto doc = parse_json_bounded(text, file);
  if (doc.is_discarded()) throw InputError(file + ": not valid JSON (truncated or binary file)");
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc.at("benchmarks").is_array())
    throw InputError(file + ": not a results file (no \"benchmarks\" array)");
  if (!doc.contains("context")) doc["context"] = nlohmann::json::object();
  check_results(doc, file);
  return doc;
}

}  // namespace dlb::harness
