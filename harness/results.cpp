// Results writer and loader (see results.h).
#include "harness/results.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kernels/common/errors.h"

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

bool write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
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
  // The lock: held while this process lives; the file says who holds it.
  const std::string lock = dir_ + "/.dlbench.lock";
  lock_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_ < 0) throw UsageError(flag + dir_ + ": cannot create " + lock + " (" + std::strerror(errno) + ")");
  if (::flock(lock_, LOCK_EX | LOCK_NB) != 0) {
    char buf[256] = {0};
    const ssize_t n = ::pread(lock_, buf, sizeof buf - 1, 0);
    std::string who = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "unknown holder";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(lock_);
    lock_ = -1;
    throw UsageError(flag + dir_ + ": in use by another dlbench run (" + who + ")");
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
  const bool has = fs::exists(js) || fs::exists(jl);
  if (mode == OutMode::fresh && has)
    throw UsageError("--out " + dir_ + ": already holds results; use --resume " + dir_ + " to finish that run or --force to replace it");
  if (mode == OutMode::resume) {
    if (!fs::exists(jl)) throw UsageError("--resume " + dir_ + ": no results.jsonl there, nothing to resume");
    read_back();
    jsonl_ = ::open(jl.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  } else {
    std::error_code ec;
    fs::remove(js, ec);  // --force: the old run's summary goes with its records
    jsonl_ = ::open(jl.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (jsonl_ < 0) throw UsageError("--out " + dir_ + ": cannot write " + jl + " (" + std::strerror(errno) + ")");
}

ResultsWriter::~ResultsWriter() {
  if (jsonl_ >= 0) ::close(jsonl_);
  if (lock_ >= 0) ::close(lock_);  // releases the flock
}

void ResultsWriter::read_back() {
  const std::string jl = dir_ + "/results.jsonl";
  std::ifstream f(jl, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::size_t pos = 0, good = 0;
  int n = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    ++n;
    auto e = nlohmann::json::parse(line, nullptr, false);
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
  if (!header_.is_object() && entries_.empty()) {  // died before its header was complete: nothing done
    fs::resize_file(jl, 0);
    return;
  }
  if (!header_.is_object())
    throw UsageError("--resume " + dir_ + ": results.jsonl has no run header (an older dlbench wrote it); cannot tell what was planned");
  if (good < text.size()) fs::resize_file(jl, good);
  else if (!text.empty() && text.back() != '\n') {  // a complete last line without its newline
    std::ofstream(jl, std::ios::app) << "\n";
  }
}

void ResultsWriter::write_header(const nlohmann::json& run) {
  if (!write_all(jsonl_, nlohmann::json{{kRunHeaderKey, run}}.dump() + "\n"))
    throw std::runtime_error("cannot write " + dir_ + "/results.jsonl (" + std::strerror(errno) + ")");
  ::fsync(jsonl_);
}

void ResultsWriter::append(const std::vector<nlohmann::json>& entries) {
  std::string lines;  // one write for the whole case: a kill leaves all of its lines or none
  for (const auto& e : entries) {
    lines += e.dump() + "\n";
    entries_.push_back(e);
  }
  if (!write_all(jsonl_, lines))
    throw std::runtime_error("cannot write " + dir_ + "/results.jsonl (" + std::strerror(errno) + ")");
  ::fsync(jsonl_);
}

void ResultsWriter::write_json(const nlohmann::json& context) const {
  nlohmann::json doc = {{"context", context}, {"benchmarks", entries_}};
  const std::string tmp = dir_ + "/.results.json." + std::to_string(::getpid()) + ".tmp", dst = dir_ + "/results.json";
  {
    std::ofstream f(tmp);
    f << doc.dump(2) << "\n";
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, dst);
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

nlohmann::json load_results(const std::string& path) {
  std::string file = path;
  if (fs::is_directory(path)) {
    file = path + "/results.json";
    if (!fs::exists(file) && fs::exists(path + "/results.jsonl")) file = path + "/results.jsonl";
    if (!fs::exists(file)) throw InputError(path + ": no results.json or results.jsonl in this folder");
  } else if (!fs::exists(path)) {
    throw InputError(path + ": no such file or folder");
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) throw InputError(file + ": cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
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
      if (e.contains(kRunHeaderKey)) {  // the run header: planned cases and options, not an entry
        if (e.at(kRunHeaderKey).is_object()) doc["context"]["run"] = e.at(kRunHeaderKey);
        continue;
      }
      doc["benchmarks"].push_back(e);
    }
    return doc;
  }
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw InputError(file + ": not valid JSON (truncated or binary file)");
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc.at("benchmarks").is_array())
    throw InputError(file + ": not a results file (no \"benchmarks\" array)");
  if (!doc.contains("context")) doc["context"] = nlohmann::json::object();
  return doc;
}

}  // namespace dlb::harness
