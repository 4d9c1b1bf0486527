// Results writer and loader (see results.h).
#include "harness/results.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
