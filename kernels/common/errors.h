// Error types shared by every layer. The CLI maps them to exit codes: UsageError/InputError -> 2,
// OutOfMemory -> a case recorded with "error": "out of memory" while the sweep goes on.
#pragma once
#include <stdexcept>
#include <string>

namespace dlb {

// Bad flags or values on the command line (exit 2, one line).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file or folder given to us is missing, truncated or of the wrong format (exit 2, one line that
// names the file).
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An allocation (host or device) failed: a result, not a crash.
struct OutOfMemory : std::runtime_error {
  explicit OutOfMemory(const std::string& what) : std::runtime_error("out of memory: " + what) {}
};

// A case could not run on this machine for a stated reason (no avx512_bf16, no CUDA device...).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace dlb
