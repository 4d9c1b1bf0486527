// Files in and out, for every layer: one reader that never blocks and never reads without bound, one
// writer that never writes through a name it did not just create, and one JSON depth limit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/common/errors.h"

namespace dlb {

// Reads `path` whole. Refused (InputError naming the path) before any byte is read: a folder, FIFO,
// device or socket (opened O_NONBLOCK, so a FIFO never blocks the open; checked with fstat on the open
// descriptor), a symbolic link when follow_links is false (O_NOFOLLOW), and a file over max_bytes (also
// one that grows past it while read). Interrupted reads are retried; nothing else waits.
std::string read_file_safely(const std::string& path, std::uint64_t max_bytes, bool follow_links = true);

// The first n bytes of `path` (all of it when shorter) and, in *size, its size: a file format's header
// checked before the body is read (no size cap here; read_file_safely with the size the header
// implies reads the rest). Refuses what read_file_safely refuses.
std::string read_file_head(const std::string& path, std::size_t n, std::uint64_t* size);

// Why a write failed, in one line naming the path: ENOSPC ("no space left on the device"), EFBIG
// ("over the file size limit (ulimit -f)"), anything else by strerror.
std::string write_failure(const std::string& path, int err);

// A new file beside `path` (".NAME.PID.N.tmp" in the same folder), created O_EXCL|O_NOFOLLOW, mode
// 0644: never an existing file or a link. Returns its descriptor (O_CLOEXEC) and sets *tmp; throws
// std::runtime_error (write_failure's line) when it cannot be made.
int create_temp_beside(const std::string& path, std::string* tmp);

// Writes all of `text` to fd; false with errno set on failure (EINTR retried).
bool write_all_fd(int fd, const std::string& text);

// `path` gets `text` whole or not at all: written to create_temp_beside's file, synced, renamed over
// `path` (a hard link or symlink at `path` is replaced, its other names keep the old bytes). On any
// failure the temporary file is removed and std::runtime_error carries write_failure's line.
void write_file_atomically(const std::string& path, const std::string& text);

// The deepest nesting any JSON input may have: nlohmann's copy, compare and dump recurse, so a valid
// document nested 150,000 deep would overflow the stack.
inline constexpr int kMaxJsonDepth = 256;

// nlohmann::json::parse(text) without exceptions (a discarded value when invalid), after a scan that
// throws InputError("<what>: nested deeper than 256 levels") for a document nested deeper than
// kMaxJsonDepth. Every JSON reader goes through this.
nlohmann::json parse_json_bounded(const std::string& text, const std::string& what);

}  // namespace dlb
