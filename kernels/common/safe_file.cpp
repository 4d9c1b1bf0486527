// Safe file reads and writes (see safe_file.h).
#include "kernels/common/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "kernels/common/errors.h"

namespace dlb {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string kind_of(mode_t m) {
  return S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISLNK(m) ? "a symbolic link" : "not a plain file";
}

std::string mib(std::uint64_t b) { return b >= (1u << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b) + " bytes"; }

// Opens `path` for reading with read_file_safely's refusals (over max_bytes too); st gets its fstat.
void open_checked(const std::string& path, std::uint64_t max_bytes, bool follow_links, Fd& f, struct stat& st) {
  auto check = [&](const struct stat& s) {
    if (S_ISDIR(s.st_mode)) throw InputError(path + ": is a folder, not a file");
    if (!S_ISREG(s.st_mode)) throw InputError(path + ": not a regular file (" + kind_of(s.st_mode) + "); refusing to read it");
    if (static_cast<std::uint64_t>(s.st_size) > max_bytes)
      throw InputError(path + ": " + mib(static_cast<std::uint64_t>(s.st_size)) + " is over the cap of " + mib(max_bytes) + " for this file");
  };
  // lstat/stat first: a FIFO or device is named without opening it at all.
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0)
    throw InputError(path + ": cannot be read (" + std::strerror(errno) + ")");
  check(st);
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (f.fd < 0) {
    if (errno == ELOOP && !follow_links) throw InputError(path + ": is a symbolic link; refusing to follow it");
    throw InputError(path + ": cannot be read (" + std::strerror(errno) + ")");
  }
  if (::fstat(f.fd, &st) != 0) throw InputError(path + ": cannot be read (" + std::strerror(errno) + ")");
  check(st);  // the name may have been swapped between stat and open
}

// read(2) into p[0, n), retrying EINTR; the bytes read (fewer at the end of the file).
std::size_t read_some(const std::string& path, int fd, char* p, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw InputError(path + ": cannot be read (" + std::strerror(errno) + ")");
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

std::string read_file_safely(const std::string& path, std::uint64_t max_bytes, bool follow_links) {
  Fd f;
  struct stat st {};
  open_checked(path, max_bytes, follow_links, f, st);
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() >= max_bytes && text.size() > 0) {
        char probe;
        if (read_some(path, f.fd, &probe, 1) == 0) break;
        throw InputError(path + ": grew past the cap of " + mib(max_bytes) + " while read");
      }
      text.resize(std::min<std::uint64_t>(max_bytes, text.size() + 65536));
    }
    const std::size_t n = read_some(path, f.fd, text.data() + got, text.size() - got);
    got += n;
    if (got < text.size()) break;  // the end of the file
  }
  text.resize(got);
  return text;
}

std::string read_file_head(const std::string& path, std::size_t n, std::uint64_t* size) {
  Fd f;
  struct stat st {};
  open_checked(path, ~std::uint64_t(0), true, f, st);
  if (size) *size = static_cast<std::uint64_t>(st.st_size);
  std::string head(std::min<std::uint64_t>(n, static_cast<std::uint64_t>(st.st_size)), '\0');
  head.resize(read_some(path, f.fd, head.data(), head.size()));
  return head;
}

std::string write_failure(const std::string& path, int err) {
  if (err == ENOSPC) return "cannot write " + path + ": no space left on the device (ENOSPC)";
  if (err == EFBIG) return "cannot write " + path + ": over the file size limit (EFBIG; see ulimit -f)";
  if (err == EDQUOT) return "cannot write " + path + ": disk quota exceeded (EDQUOT)";
  return "cannot write " + path + " (" + std::strerror(err) + ")";
}

bool write_all_fd(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

int create_temp_beside(const std::string& path, std::string* tmp) {
  static std::atomic<unsigned> seq{0};
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  for (int tries = 0; tries < 100; ++tries) {
    *tmp = dir + "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(seq.fetch_add(1)) + ".tmp";
    const int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw std::runtime_error(write_failure(*tmp, errno));
  }
  throw std::runtime_error(write_failure(*tmp, EEXIST));
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp;
  const int fd = create_temp_beside(path, &tmp);
  int err = 0;
  if (!write_all_fd(fd, text)) err = errno;
  else if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(write_failure(path, err));
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(write_failure(path, err));
  }
}

nlohmann::json parse_json_bounded(const std::string& text, const std::string& what) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw InputError(what + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (not a results file)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace dlb
