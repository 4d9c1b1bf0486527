// Writing the synthetic CIFAR-10 to disk (see make.h). Every file is created new (O_EXCL, no link
// followed) inside a form folder made here, so nothing that existed is ever written through.
#include "models/loader/make.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"
#include "models/data.h"
#include "models/loader/codec.h"
#include "models/loader/pickle.h"
#include "models/loader/source.h"

namespace dlb::models::loader {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kRow = 3072, kPlane = 1024;

struct Writer {
  MakeReport r;
  void file(const fs::path& p, const std::string& bytes) {
    const std::string path = p.string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw InputError(write_failure(path, errno));
    const bool ok = write_all_fd(fd, bytes);
    const int err = errno;
    if (::close(fd) != 0 && ok) throw InputError(write_failure(path, errno));
    if (!ok) throw InputError(write_failure(path, err));
    r.files += 1;
    r.bytes += bytes.size();
  }
  void folder(const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) throw InputError("cannot create " + p.string() + ": " + ec.message());
  }
};

// Batch sizes of the real train split: five near-equal batches (10,000 each for 50,000).
std::vector<std::size_t> batch_sizes(std::size_t n) {
  std::vector<std::size_t> s(5, n / 5);
  for (std::size_t k = 0; k < n % 5; ++k) s[k] += 1;
  return s;
}

void write_python(Writer& w, const fs::path& dir, const ByteImages& train, const ByteImages& test) {
  const auto sizes = batch_sizes(train.size());
  std::size_t first = 0;
  auto batch = [&](const ByteImages& d, std::size_t from, std::size_t n, const std::string& label, const fs::path& file) {
    PickleWriter p;
    p.key("data");
    p.u8_matrix(d.pixels.data() + from * kRow, n, kRow);
    p.key("labels");
    p.int_list(std::vector<std::int32_t>(d.labels.begin() + from, d.labels.begin() + from + n));
    p.key("batch_label");
    p.str(label);
    p.key("filenames");
    std::vector<std::string> names(n);
    for (std::size_t i = 0; i < n; ++i) {
      char s[40];
      std::snprintf(s, sizeof s, "synthetic_s_%06zu.png", from + i);
      names[i] = s;
    }
    p.str_list(names);
    w.file(file, p.finish());
  };
  for (int b = 0; b < 5; ++b) {
    batch(train, first, sizes[b], "training batch " + std::to_string(b + 1) + " of 5", dir / ("data_batch_" + std::to_string(b + 1)));
    first += sizes[b];
  }
  batch(test, 0, test.size(), "testing batch 1 of 1", dir / "test_batch");
  PickleWriter meta;
  meta.key("num_cases_per_batch");
  meta.integer(static_cast<std::int64_t>(sizes[0]));
  meta.key("label_names");
  meta.str_list(cifar10_classes());
  meta.key("num_vis");
  meta.integer(kRow);
  w.file(dir / "batches.meta", meta.finish());
}

void write_binary(Writer& w, const fs::path& dir, const ByteImages& train, const ByteImages& test) {
  auto batch = [&](const ByteImages& d, std::size_t from, std::size_t n, const fs::path& file) {
    std::string out(n * (kRow + 1), '\0');
    for (std::size_t i = 0; i < n; ++i) {
      out[i * (kRow + 1)] = static_cast<char>(d.labels[from + i]);
      std::copy(d.pixels.begin() + (from + i) * kRow, d.pixels.begin() + (from + i + 1) * kRow, out.begin() + i * (kRow + 1) + 1);
    }
    w.file(file, out);
  };
  const auto sizes = batch_sizes(train.size());
  std::size_t first = 0;
  for (int b = 0; b < 5; ++b) {
    batch(train, first, sizes[b], dir / ("data_batch_" + std::to_string(b + 1) + ".bin"));
    first += sizes[b];
  }
  batch(test, 0, test.size(), dir / "test_batch.bin");
  std::string names;
  for (const auto& n : cifar10_classes()) names += n + "\n";
  w.file(dir / "batches.meta.txt", names);
}

void write_images(Writer& w, const fs::path& dir, const ByteImages& d, bool png) {
  const auto& classes = cifar10_classes();
  for (const auto& c : classes) w.folder(dir / c);
  const int digits = d.size() > 100000 ? 7 : 5;
  std::vector<std::uint8_t> hwc(kRow);
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::uint8_t* chw = d.pixels.data() + i * kRow;
    for (std::size_t p = 0; p < kPlane; ++p)
      for (std::size_t c = 0; c < 3; ++c) hwc[p * 3 + c] = chw[c * kPlane + p];
    char name[32];
    std::snprintf(name, sizeof name, "%0*zu.%s", digits, i, png ? "png" : "jpg");
    w.file(dir / classes[d.labels[i]] / name, png ? png_encode(hwc.data(), 32, 32) : jpeg_encode(hwc.data(), 32, 32, kJpegQuality));
  }
}

}  // namespace

DiskFormat parse_disk_format(const std::string& s) {
  if (s == "python") return DiskFormat::python;
  if (s == "binary") return DiskFormat::binary;
  if (s == "png") return DiskFormat::png;
  if (s == "jpeg" || s == "jpg") return DiskFormat::jpeg;
  throw UsageError("format '" + s + "': expected python, binary, png or jpeg");
}

const char* disk_format_name(DiskFormat f) {
  switch (f) {
    case DiskFormat::python: return "python";
    case DiskFormat::binary: return "binary";
    case DiskFormat::png: return "png";
    case DiskFormat::jpeg: return "jpeg";
  }
  return "?";
}

const char* disk_format_folder(DiskFormat f) {
  switch (f) {
    case DiskFormat::python: return "cifar-10-batches-py";
    case DiskFormat::binary: return "cifar-10-batches-bin";
    case DiskFormat::png: return "cifar10-png";
    case DiskFormat::jpeg: return "cifar10-jpeg";
  }
  return "?";
}

MakeReport make_cifar10(const std::string& dir, DiskFormat f, std::size_t n_train, std::size_t n_test, std::uint64_t seed) {
  const fs::path folder = fs::path(dir) / disk_format_folder(f);
  std::error_code ec;
  if (fs::exists(folder, ec) || fs::is_symlink(folder, ec))
    throw InputError(folder.string() + ": exists already (remove it, or write into another folder)");
  Writer w;
  w.folder(dir);
  if (!fs::create_directory(folder, ec) || ec)
    throw InputError("cannot create " + folder.string() + (ec ? ": " + ec.message() : ": exists already"));
  w.r.folder = folder.string();
  ByteImages train, test;
  synthetic_cifar10_bytes(n_train, n_test, seed, &train, &test);
  switch (f) {
    case DiskFormat::python: write_python(w, folder, train, test); break;
    case DiskFormat::binary: write_binary(w, folder, train, test); break;
    case DiskFormat::png:
    case DiskFormat::jpeg:
      w.folder(folder / "train");
      w.folder(folder / "test");
      write_images(w, folder / "train", train, f == DiskFormat::png);
      write_images(w, folder / "test", test, f == DiskFormat::png);
      break;
  }
  return w.r;
}

}  // namespace dlb::models::loader
