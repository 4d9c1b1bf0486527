// Results on disk, in Google Benchmark's JSON layout: results.json = {"context": fingerprint,
// "benchmarks": [entries]}; results.jsonl gets every entry appended and flushed as each case finishes,
// so an interrupted run loses nothing.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::harness {

class ResultsWriter {
 public:
  // Creates `dir` (UsageError if it cannot) and starts a fresh results.jsonl there.
  explicit ResultsWriter(std::string dir);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // Appends entries to results.jsonl and flushes them to disk.
  void append(const std::vector<nlohmann::json>& entries);
  // Writes results.json (atomically: temp file + rename) from the context and every entry so far.
  void write_json(const nlohmann::json& context) const;

  const std::string& dir() const { return dir_; }
  const std::vector<nlohmann::json>& entries() const { return entries_; }

 private:
  std::string dir_;
  std::FILE* jsonl_ = nullptr;
  std::vector<nlohmann::json> entries_;
};

// Reads results.json (or results.jsonl when only that survived) from a results folder or a file.
// Throws InputError naming the file when it is missing, truncated or not dlbench/Google Benchmark JSON,
// and naming the entry when a known field has the wrong type or a timed entry's time is zero, negative
// or not finite.
nlohmann::json load_results(const std::string& path);

// The most bytes a user-given input file may hold: $DLBENCH_MAX_INPUT_MB MiB (default 256).
// UsageError when the variable is not a whole number from 1 to 1048576.
std::uint64_t max_input_bytes();

// Reads a user-given input file whole without ever blocking: a folder, FIFO, device or socket is
// refused before any read (stat, then open with O_NONBLOCK and fstat), and so is a file over
// max_input_bytes(). Throws InputError naming the file.
std::string read_input_file(const std::string& path);

// The same checks without reading: for a results folder, on the results.json (else results.jsonl) in
// it. For readers of their own (report.py) that must never meet a FIFO, device or huge file.
void check_results_input(const std::string& path);

}  // namespace dlb::harness
