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

// How `run` treats a results folder that already holds results: refuse (exit 2), replace them
// (--force) or keep them and add the missing cases (--resume).
enum class OutMode { fresh, force, resume };

class ResultsWriter {
 public:
  // Opens `dir` ("" = a new folder results/<timestamp>-<host>-<pid>, made with an exclusive mkdir)
  // and locks it for this process (flock on DIR/.dlbench.lock, released at exit): UsageError naming
  // the holder (pid, host, start time) when another run has it, when it cannot be created, when it
  // holds results and mode is fresh, or when mode is resume and there is nothing to resume.
  explicit ResultsWriter(std::string dir, OutMode mode = OutMode::fresh);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // The first line of a new results.jsonl: {"dlbench_run": run} (planned cases, options, machine),
  // so that a reader can tell N done of M planned after any death. Not for a resumed folder.
  void write_header(const nlohmann::json& run);
  // Resume: the stored header's "dlbench_run" object (null for a fresh folder).
  const nlohmann::json& stored_header() const { return header_; }

  // Appends a case's entries to results.jsonl in one write and syncs them to disk.
  void append(const std::vector<nlohmann::json>& entries);
  // Writes results.json (atomically: a temp file of this process in the folder + rename) from the
  // context and every entry so far (on resume: the kept ones first).
  void write_json(const nlohmann::json& context) const;

  const std::string& dir() const { return dir_; }
  const std::vector<nlohmann::json>& entries() const { return entries_; }
  // For keys derived across cases (bench::Suite::derive) after the entries were appended: the next
  // write_json shows them; results.jsonl keeps the entries as appended.
  std::vector<nlohmann::json>& entries() { return entries_; }

 private:
  void open_results(OutMode mode);
  // Resume: header and entries of results.jsonl; returns the lines to keep (a cut-off last line dropped).
  std::string read_back();
  std::string dir_;
  int jsonl_ = -1, lock_ = -1;
  nlohmann::json header_;
  std::vector<nlohmann::json> entries_;
};

// The run-state of a loaded results document: "complete", "interrupted" (stopped by a signal) or
// "incomplete" (died, e.g. SIGKILL, or still running), with cases done and planned (planned 0: not
// recorded, a file from an older dlbench: then "complete" unless marked interrupted).
struct RunState {
  std::string state = "complete";
  std::size_t done = 0, planned = 0;
  bool complete() const { return state == "complete"; }
  std::string describe() const;  // "interrupted, 3 of 10 cases"
};
RunState run_state(const nlohmann::json& doc);

// The JSON line at the head of results.jsonl carries this key (entries never do).
inline constexpr const char* kRunHeaderKey = "dlbench_run";

// Reads results.json (or results.jsonl when only that survived) from a results folder or a file.
// A results.jsonl's header line goes to context.run (planned cases, options); files without one load.
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
