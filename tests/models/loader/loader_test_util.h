// For the loader's tests (test_loader*.cpp): a temporary folder removed afterwards, a small synthetic
// CIFAR-10 written in one or more forms, and Debian's python3 (which has numpy and Pillow) run as a
// real process on a script.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/common/child.h"
#include "models/loader/make.h"

namespace loader_test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dlb_loader_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& f) const { return (std::filesystem::path(path_) / f).string(); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The synthetic set in `forms` under dir (n train, n/5 test images, seed 7: every class present).
inline void make_set(const std::string& dir, std::vector<dlb::models::loader::DiskFormat> forms, std::size_t n = 240) {
  for (auto f : forms) dlb::models::loader::make_cifar10(dir, f, n, n / 5, 7);
}

// Debian's python3 (numpy, Pillow), or "" when it is missing; DLBENCH_TEST_PYTHON names another (a
// venv with PyPI's Pillow, to compare the decoders with its bundled libjpeg-turbo).
inline std::string python() {
  if (const char* p = std::getenv("DLBENCH_TEST_PYTHON"); p && *p) return p;
  for (const char* p : {"/usr/bin/python3"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// Runs `code` under python3 with `args`; its output, or fails the test with it on a nonzero exit.
inline std::string run_python(const std::string& code, const std::vector<std::string>& args, int* status = nullptr) {
  std::vector<std::string> argv = {python(), "-c", code};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  const int st = dlb::run_child(argv, {}, {}, &out);
  if (status) *status = st;
  else EXPECT_EQ(st, 0) << out;
  return out;
}

}  // namespace loader_test
