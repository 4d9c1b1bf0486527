// Dataset readers and the synthetic generator (see data.h). Files are read whole through zlib's
// gzopen/gzread, which reads gzip and plain files alike, then parsed with size checks before any
// pixel is touched, so a truncated or foreign file fails with one line naming it.
#include "models/data.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "kernels/common/errors.h"

namespace dlb::models {

namespace fs = std::filesystem;

namespace {

constexpr int kCifarC = 3, kCifarH = 32, kCifarW = 32, kCifarClasses = 10;
constexpr std::size_t kCifarPixels = kCifarC * kCifarH * kCifarW;  // 3072 bytes per image
constexpr std::size_t kCifarRecord = 1 + kCifarPixels;             // 3073 bytes per record

// ToTensor then Normalize((0.5,)*3, (0.5,)*3), in the same float operations as torchvision.
inline float cifar_normalize(float byte) { return (byte / 255.0f - 0.5f) / 0.5f; }

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw InputError("dataset file " + path + ": " + why);
}

// The memory a dataset may take as a whole, in floats: 4 GiB (real CIFAR-10 takes 0.74 GB, MNIST
// 0.22 GB). Each pixel byte becomes a 4-byte float, so six files just under the per-file cap would ask
// for ~24 GiB: the whole set is checked before any file is inflated, and again while inflating.
constexpr std::uint64_t kMaxDatasetFloatBytes = std::uint64_t(4) << 30;

// What a file will inflate to: a gzip file's ISIZE trailer (the size mod 4 GiB; more members or a
// forged trailer are caught while inflating), else its size. 0 when it cannot be told.
std::uint64_t inflated_bytes(const std::string& path) {
  std::error_code ec;
  const std::uint64_t size = fs::file_size(path, ec);
  if (ec || !fs::is_regular_file(path, ec)) return 0;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) return 0;
  unsigned char magic[2] = {0, 0};
  if (std::fread(magic, 1, 2, f.get()) != 2 || magic[0] != 0x1f || magic[1] != 0x8b || size < 18) return size;
  unsigned char t[4];
  if (std::fseek(f.get(), -4, SEEK_END) != 0 || std::fread(t, 1, 4, f.get()) != 4) return size;
  const std::uint64_t isize = std::uint64_t(t[0]) | std::uint64_t(t[1]) << 8 | std::uint64_t(t[2]) << 16 | std::uint64_t(t[3]) << 24;
  // Deflate inflates at most ~1032:1: a larger claim is a cut-off or corrupt file, which the inflating
  // itself names (truncated, corrupt); not counted here.
  return isize <= size * 1032 + 1024 ? isize : 0;
}

// The dataset's pixel bytes still allowed (each becomes a float) while its files are inflated.
struct DatasetBudget {
  std::uint64_t left = kMaxDatasetFloatBytes / sizeof(float);
};

[[noreturn]] void over_budget(const std::string& what, std::uint64_t raw) {
  throw InputError("dataset " + what + ": " + std::to_string(raw >> 20) + " MiB of pixels would take " +
                   std::to_string((raw * sizeof(float)) >> 20) + " MiB as floats, over the " +
                   std::to_string(kMaxDatasetFloatBytes >> 20) + " MiB a dataset may take");
}

// Before anything is inflated: the files' sizes as they will inflate, summed against the budget.
void check_dataset_size(const std::string& dir, const std::vector<std::string>& files, DatasetBudget& budget) {
  std::uint64_t raw = 0;
  for (const auto& f : files) raw += inflated_bytes(f);
  if (raw > budget.left) over_budget("folder " + dir, raw);
}

// The whole (decompressed) content of a regular file, charged to the dataset's budget.
std::vector<unsigned char> read_all(const std::string& path, DatasetBudget& budget) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "missing");
  if (!fs::is_regular_file(path, ec)) fail(path, "not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail(path, "cannot be opened");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  gzbuffer(f, 1 << 17);
  std::vector<unsigned char> out;
  const std::size_t file_bytes = static_cast<std::size_t>(fs::file_size(path, ec));
  // The largest real dataset file (a CIFAR-10 batch, 30 MB; MNIST's 47 MB) is far below this; a bigger
  // file or a gzip stream that inflates past it is refused before memory runs out.
  constexpr std::size_t kMaxBytes = std::size_t(1) << 30;
  if (!ec && file_bytes > kMaxBytes)
    fail(path, std::to_string(file_bytes >> 20) + " MiB is over the 1024 MiB cap for a dataset file");
  out.reserve(ec ? 0 : file_bytes);
  std::array<unsigned char, 1 << 16> buf;
  for (;;) {
    const int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      fail(path, std::string("unreadable or corrupt (") + (msg && *msg ? msg : "read error") + ")");
    }
    if (n == 0) break;
    if (out.size() + std::size_t(n) > kMaxBytes) fail(path, "inflates past the 1024 MiB cap for a dataset file");
    if (out.size() + std::size_t(n) > budget.left) over_budget("file " + path, kMaxDatasetFloatBytes / sizeof(float) - budget.left + out.size() + n);
    out.insert(out.end(), buf.data(), buf.data() + n);
  }
  // zlib reports a gzip stream cut short as a clean end of file; ask it explicitly.
  int errnum = 0;
  gzerror(f, &errnum);
  if (errnum == Z_BUF_ERROR) fail(path, "truncated (the gzip stream ends early)");
  budget.left -= out.size();
  return out;
}

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

std::string basename_of(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

void require_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw InputError("dataset folder " + dir + ": missing");
  if (!fs::is_directory(dir, ec)) throw InputError("dataset folder " + dir + ": not a folder");
}

// ---- CIFAR-10 binary ----

void append_cifar(const std::string& path, Dataset& d, DatasetBudget& budget) {
  const auto bytes = read_all(path, budget);
  if (bytes.empty()) fail(path, "empty");
  if (bytes.size() % kCifarRecord != 0)
    fail(path, "truncated or not CIFAR-10 binary (" + std::to_string(bytes.size()) +
                   " bytes is not a whole number of 3073-byte records)");
  const std::size_t n = bytes.size() / kCifarRecord, base = d.labels.size();
  d.labels.resize(base + n);
  d.images.resize((base + n) * kCifarPixels);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* rec = bytes.data() + i * kCifarRecord;
    if (rec[0] >= kCifarClasses)
      fail(path, "record " + std::to_string(i) + " has label " + std::to_string(rec[0]) +
                     " (CIFAR-10 labels are 0..9); not CIFAR-10 binary");
    d.labels[base + i] = rec[0];
    float* img = d.images.data() + (base + i) * kCifarPixels;
    for (std::size_t j = 0; j < kCifarPixels; ++j) img[j] = cifar_normalize(rec[1 + j]);
  }
}

Dataset cifar_shell(const std::string& name) {
  Dataset d;
  d.name = name;
  d.c = kCifarC, d.h = kCifarH, d.w = kCifarW, d.classes = kCifarClasses;
  return d;
}

// ---- IDX ----

// dir/stem or dir/stem.gz, whichever exists (plain first).
std::string idx_path(const std::string& dir, const std::string& stem) {
  const std::string plain = (fs::path(dir) / stem).string();
  std::error_code ec;
  if (fs::exists(plain, ec)) return plain;
  const std::string gz = plain + ".gz";
  if (fs::exists(gz, ec)) return gz;
  fail(plain + "[.gz]", "missing");
}

struct IdxImages {
  std::size_t n = 0;
  int rows = 0, cols = 0;
  std::vector<unsigned char> bytes;  // header included
};

IdxImages read_idx_images(const std::string& path, DatasetBudget& budget) {
  IdxImages r;
  r.bytes = read_all(path, budget);
  const auto& b = r.bytes;
  if (b.size() < 16) fail(path, "truncated (" + std::to_string(b.size()) + " bytes, the IDX header alone is 16)");
  const std::uint32_t magic = be32(b.data());
  if (magic != 0x00000803)
    fail(path, "wrong magic number 0x" + [&] { char s[16]; std::snprintf(s, sizeof s, "%08x", magic); return std::string(s); }() +
                   " (an IDX image file of unsigned bytes in 3 dimensions has 0x00000803)");
  const std::uint32_t n = be32(b.data() + 4), rows = be32(b.data() + 8), cols = be32(b.data() + 12);
  if (n == 0 || rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
    fail(path, "implausible dimensions " + std::to_string(n) + "x" + std::to_string(rows) + "x" + std::to_string(cols));
  const std::size_t want = 16 + std::size_t(n) * rows * cols;
  if (b.size() < want)
    fail(path, "truncated (" + std::to_string(b.size()) + " bytes, the header says " + std::to_string(want) + ")");
  if (b.size() > want)
    fail(path, "wrong dimensions (" + std::to_string(b.size()) + " bytes, the header says " + std::to_string(want) + ")");
  r.n = n, r.rows = static_cast<int>(rows), r.cols = static_cast<int>(cols);
  return r;
}

std::vector<unsigned char> read_idx_labels(const std::string& path, DatasetBudget& budget) {
  auto b = read_all(path, budget);
  if (b.size() < 8) fail(path, "truncated (" + std::to_string(b.size()) + " bytes, the IDX header alone is 8)");
  const std::uint32_t magic = be32(b.data());
  if (magic != 0x00000801)
    fail(path, "wrong magic number 0x" + [&] { char s[16]; std::snprintf(s, sizeof s, "%08x", magic); return std::string(s); }() +
                   " (an IDX label file of unsigned bytes in 1 dimension has 0x00000801)");
  const std::size_t n = be32(b.data() + 4);
  if (b.size() < 8 + n) fail(path, "truncated (" + std::to_string(b.size()) + " bytes, the header says " + std::to_string(8 + n) + ")");
  if (b.size() > 8 + n) fail(path, "wrong dimensions (" + std::to_string(b.size()) + " bytes, the header says " + std::to_string(8 + n) + ")");
  b.erase(b.begin(), b.begin() + 8);
  return b;
}

Dataset load_idx_pair(const std::string& dir, const std::string& prefix, const std::string& name, DatasetBudget& budget) {
  const std::string ip = idx_path(dir, prefix + "-images-idx3-ubyte");
  const std::string lp = idx_path(dir, prefix + "-labels-idx1-ubyte");
  IdxImages im = read_idx_images(ip, budget);
  const auto lab = read_idx_labels(lp, budget);
  if (lab.size() != im.n)
    fail(lp, "holds " + std::to_string(lab.size()) + " labels but " + ip + " holds " + std::to_string(im.n) + " images");
  Dataset d;
  d.name = name;
  d.c = 1, d.h = im.rows, d.w = im.cols, d.classes = 10;
  d.labels.resize(im.n);
  for (std::size_t i = 0; i < im.n; ++i) {
    if (lab[i] >= 10)
      fail(lp, "label " + std::to_string(i) + " is " + std::to_string(lab[i]) + " (MNIST-style labels are 0..9)");
    d.labels[i] = lab[i];
  }
  const std::size_t px = im.n * std::size_t(im.rows) * im.cols;
  d.images.resize(px);
  const unsigned char* src = im.bytes.data() + 16;
  for (std::size_t j = 0; j < px; ++j) d.images[j] = src[j] * (1.0f / 255.0f);  // ToTensor: x/255
  return d;
}

// ---- synthetic ----

struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Per class: a pattern in the normalized [-1, 1] range, one plane per channel.
std::vector<float> class_patterns(std::uint64_t seed) {
  SplitMix rng{seed * 0x2545F4914F6CDD1Dull + 0x1234567ull};
  std::vector<float> p(std::size_t(kCifarClasses) * kCifarPixels);
  const double two_pi = 6.283185307179586;
  for (int k = 0; k < kCifarClasses; ++k)
    for (int c = 0; c < kCifarC; ++c) {
      const double mean = 0.5 * (rng.uniform() * 2 - 1);           // the class's colour cast
      const double fx = 1 + std::floor(rng.uniform() * 3), fy = 1 + std::floor(rng.uniform() * 3);
      const double phase = rng.uniform() * two_pi, amp = 0.25 + 0.2 * rng.uniform();
      float* plane = p.data() + (std::size_t(k) * kCifarC + c) * kCifarH * kCifarW;
      for (int y = 0; y < kCifarH; ++y)
        for (int x = 0; x < kCifarW; ++x)
          plane[y * kCifarW + x] = static_cast<float>(
              mean + amp * std::sin(two_pi * (fx * x + fy * y) / kCifarW + phase));
    }
  return p;
}

// One synthetic image's 8-bit pixels (CHW) and label from the stream `rng`.
int synth_image(SplitMix& rng, const std::vector<float>& patterns, unsigned char* px) {
  const int k = static_cast<int>(rng.next() % kCifarClasses);
  const float* pat = patterns.data() + std::size_t(k) * kCifarPixels;
  for (std::size_t j = 0; j < kCifarPixels; j += 4) {
    // One 64-bit draw gives four 16-bit noise values in [-0.6, 0.6).
    std::uint64_t z = rng.next();
    for (std::size_t q = 0; q < 4; ++q, z >>= 16) {
      const float noise = (static_cast<float>(z & 0xFFFF) * (1.0f / 65536.0f) - 0.5f) * 1.2f;
      const float v = std::clamp(pat[j + q] + noise, -1.0f, 1.0f);  // to 8-bit pixels like a real image
      px[j + q] = static_cast<unsigned char>(std::nearbyint((v + 1.0f) * 127.5f));
    }
  }
  return k;
}

ByteImages synth_bytes(std::size_t n, const std::vector<float>& patterns, std::uint64_t stream) {
  ByteImages b;
  try {
    b.labels.resize(n);
    b.pixels.resize(n * kCifarPixels);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("synthetic dataset of " + std::to_string(n) + " images");
  }
  SplitMix rng{stream};
  for (std::size_t i = 0; i < n; ++i) b.labels[i] = synth_image(rng, patterns, b.pixels.data() + i * kCifarPixels);
  return b;
}

// The float dataset: the same bytes, then the CIFAR normalization.
Dataset synth(std::size_t n, const std::vector<float>& patterns, std::uint64_t stream, const std::string& name) {
  const ByteImages b = synth_bytes(n, patterns, stream);
  Dataset d = cifar_shell(name);
  try {
    d.images.resize(b.pixels.size());
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("synthetic dataset of " + std::to_string(n) + " images");
  }
  d.labels = b.labels;
  for (std::size_t j = 0; j < b.pixels.size(); ++j) d.images[j] = cifar_normalize(b.pixels[j]);
  return d;
}

constexpr std::uint64_t train_stream(std::uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 1; }
constexpr std::uint64_t test_stream(std::uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull; }

}  // namespace

Split synthetic_cifar10(std::size_t n_train, std::size_t n_test, std::uint64_t seed) {
  const auto patterns = class_patterns(seed);
  Split s;
  s.train = synth(n_train, patterns, train_stream(seed), "synthetic-cifar10");
  s.test = synth(n_test, patterns, test_stream(seed), "synthetic-cifar10");
  return s;
}

void synthetic_cifar10_bytes(std::size_t n_train, std::size_t n_test, std::uint64_t seed, ByteImages* train, ByteImages* test) {
  const auto patterns = class_patterns(seed);
  if (train) *train = synth_bytes(n_train, patterns, train_stream(seed));
  if (test) *test = synth_bytes(n_test, patterns, test_stream(seed));
}

Split load_cifar10(const std::string& dir) {
  require_dir(dir);
  Split s;
  s.train = cifar_shell("cifar10");
  s.test = cifar_shell("cifar10");
  std::vector<std::string> files;
  for (int b = 1; b <= 5; ++b) files.push_back((fs::path(dir) / ("data_batch_" + std::to_string(b) + ".bin")).string());
  files.push_back((fs::path(dir) / "test_batch.bin").string());
  DatasetBudget budget;
  check_dataset_size(dir, files, budget);
  for (int b = 0; b < 5; ++b) append_cifar(files[b], s.train, budget);
  append_cifar(files[5], s.test, budget);
  return s;
}

Split load_mnist_idx(const std::string& dir) {
  require_dir(dir);
  const std::string name = basename_of(dir);
  Split s;
  DatasetBudget budget;
  std::vector<std::string> files;
  for (const char* stem : {"train-images-idx3-ubyte", "t10k-images-idx3-ubyte"}) {
    const std::string plain = (fs::path(dir) / stem).string();
    std::error_code ec;
    files.push_back(fs::exists(plain, ec) ? plain : plain + ".gz");
  }
  check_dataset_size(dir, files, budget);
  s.train = load_idx_pair(dir, "train", name, budget);
  s.test = load_idx_pair(dir, "t10k", name, budget);
  if (s.train.h != s.test.h || s.train.w != s.test.w)
    throw InputError("dataset folder " + dir + ": train images are " + std::to_string(s.train.h) + "x" +
                     std::to_string(s.train.w) + " but t10k images are " + std::to_string(s.test.h) + "x" +
                     std::to_string(s.test.w));
  return s;
}

std::string find_fashion_mnist() {
  std::string found;
  if (FILE* p = popen("dpkg -L dataset-fashion-mnist 2>/dev/null", "r")) {
    char line[4096];
    const std::string want = "/train-images-idx3-ubyte.gz";
    while (std::fgets(line, sizeof line, p)) {
      std::string s(line);
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (s.size() > want.size() && s.compare(s.size() - want.size(), want.size(), want) == 0) found = s;
    }
    pclose(p);
  }
  if (found.empty()) return "";
  std::error_code ec;
  if (!fs::is_regular_file(found, ec)) return "";  // listed but removed by hand
  return fs::path(found).parent_path().string();
}

Split load_dataset(const std::string& spec) {
  if (spec == "synthetic") return synthetic_cifar10(50000, 10000, 0);
  if (spec == "fashion-mnist") {
    const std::string dir = find_fashion_mnist();
    if (dir.empty())
      throw InputError("dataset fashion-mnist: the Debian package dataset-fashion-mnist is not installed "
                       "(apt-get install dataset-fashion-mnist, or give the folder of its IDX files)");
    Split s = load_mnist_idx(dir);
    s.train.name = s.test.name = "fashion-mnist";
    return s;
  }
  std::error_code ec;
  if (!fs::exists(spec, ec))
    throw InputError("dataset '" + spec + "': no such folder (expected synthetic, fashion-mnist or a folder)");
  if (!fs::is_directory(spec, ec))
    throw InputError("dataset " + spec + ": not a folder (give the folder holding the dataset files)");
  auto has = [&](const fs::path& d, const std::string& f) { return fs::exists(d / f, ec); };
  for (const fs::path& d : {fs::path(spec), fs::path(spec) / "cifar-10-batches-bin"})
    if (has(d, "data_batch_1.bin") || has(d, "test_batch.bin")) return load_cifar10(d.string());
  if (has(spec, "train-images-idx3-ubyte") || has(spec, "train-images-idx3-ubyte.gz") ||
      has(spec, "t10k-images-idx3-ubyte") || has(spec, "t10k-images-idx3-ubyte.gz"))
    return load_mnist_idx(spec);
  throw InputError("dataset folder " + spec +
                   ": neither CIFAR-10 binary batches (data_batch_1.bin) nor MNIST IDX files "
                   "(train-images-idx3-ubyte[.gz]) found");
}

}  // namespace dlb::models
