// Datasets (models/data.h): the synthetic generator, CIFAR-10 binary and MNIST IDX readers on small
// files written here (plain and gzipped), the bad-input contract (InputError naming the file), and
// the Debian Fashion-MNIST package when it is installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "models/data.h"

namespace fs = std::filesystem;
using dlb::InputError;
using namespace dlb::models;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dlb_test_data_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& f) const { return (fs::path(path_) / f).string(); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

using Bytes = std::vector<unsigned char>;

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
  gzclose(f);
}

void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

// pixel value of image i, index j: a pattern the test can recompute
unsigned char px(std::size_t i, std::size_t j) { return static_cast<unsigned char>((i * 31 + j * 7) & 0xFF); }

Bytes idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  Bytes b;
  put_be32(b, 0x00000803), put_be32(b, n), put_be32(b, rows), put_be32(b, cols);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < std::size_t(rows) * cols; ++j) b.push_back(px(i, j));
  return b;
}

Bytes idx_labels(std::uint32_t n, std::uint32_t offset = 0) {
  Bytes b;
  put_be32(b, 0x00000801), put_be32(b, n);
  for (std::size_t i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>((i + offset) % 10));
  return b;
}

Bytes cifar_batch(std::size_t n, std::size_t first) {
  Bytes b;
  for (std::size_t i = first; i < first + n; ++i) {
    b.push_back(static_cast<unsigned char>(i % 10));
    for (std::size_t j = 0; j < 3072; ++j) b.push_back(px(i, j));
  }
  return b;
}

void write_cifar(const TempDir& d, std::size_t per_batch) {
  for (int k = 1; k <= 5; ++k) write_file(d / ("data_batch_" + std::to_string(k) + ".bin"), cifar_batch(per_batch, (k - 1) * per_batch));
  write_file(d / "test_batch.bin", cifar_batch(per_batch, 1000));
}

void write_mnist(const TempDir& d, bool gz, std::uint32_t rows = 28, std::uint32_t cols = 28) {
  auto w = [&](const std::string& stem, const Bytes& b) { gz ? write_gz(d / (stem + ".gz"), b) : write_file(d / stem, b); };
  w("train-images-idx3-ubyte", idx_images(20, rows, cols));
  w("train-labels-idx1-ubyte", idx_labels(20));
  w("t10k-images-idx3-ubyte", idx_images(7, rows, cols));
  w("t10k-labels-idx1-ubyte", idx_labels(7, 3));
}

// The message of the InputError thrown by f (fails the test when none is thrown).
template <class F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing thrown";
  return "";
}

}  // namespace

TEST(Data, SyntheticShapesDeterminismAndRange) {
  const Split a = synthetic_cifar10(64, 16, 7), b = synthetic_cifar10(64, 16, 7), c = synthetic_cifar10(64, 16, 8);
  EXPECT_EQ(a.train.size(), 64u);
  EXPECT_EQ(a.test.size(), 16u);
  EXPECT_EQ(a.train.c, 3);
  EXPECT_EQ(a.train.h, 32);
  EXPECT_EQ(a.train.w, 32);
  EXPECT_EQ(a.train.classes, 10);
  EXPECT_EQ(a.train.images.size(), 64u * 3072);
  EXPECT_EQ(a.train.images, b.train.images);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_NE(a.train.images, c.train.images);
  EXPECT_NE(std::vector<float>(a.train.images.begin(), a.train.images.begin() + 16 * 3072), a.test.images);
  for (float v : a.train.images) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LE(v, 1.0f);
    // 8-bit quantized like a real image, then (x/255 - 0.5)/0.5
    const float byte = (v + 1.0f) * 127.5f;
    ASSERT_NEAR(byte, std::round(byte), 1e-3);
  }
  for (int32_t l : a.train.labels) ASSERT_TRUE(l >= 0 && l < 10);
}

// Learnable: a nearest-class-mean classifier fit on the train split beats chance by far on the test.
TEST(Data, SyntheticIsLearnable) {
  const Split s = synthetic_cifar10(2000, 500, 1);
  const std::size_t P = 3072;
  std::vector<double> mean(10 * P, 0.0);
  std::vector<int> count(10, 0);
  for (std::size_t i = 0; i < s.train.size(); ++i) {
    const int k = s.train.labels[i];
    ++count[k];
    for (std::size_t j = 0; j < P; ++j) mean[k * P + j] += s.train.images[i * P + j];
  }
  for (int k = 0; k < 10; ++k) {
    ASSERT_GT(count[k], 100) << "class " << k << " is rare";
    for (std::size_t j = 0; j < P; ++j) mean[k * P + j] /= count[k];
  }
  int correct = 0;
  for (std::size_t i = 0; i < s.test.size(); ++i) {
    int best = -1;
    double best_d = 1e300;
    for (int k = 0; k < 10; ++k) {
      double d = 0;
      for (std::size_t j = 0; j < P; ++j) {
        const double e = s.test.images[i * P + j] - mean[k * P + j];
        d += e * e;
      }
      if (d < best_d) best_d = d, best = k;
    }
    correct += best == s.test.labels[i];
  }
  EXPECT_GT(correct, 0.5 * s.test.size());  // chance is 10%
}

TEST(Data, Cifar10Binary) {
  TempDir d;
  write_cifar(d, 3);
  const Split s = load_cifar10(d.str());
  ASSERT_EQ(s.train.size(), 15u);
  ASSERT_EQ(s.test.size(), 3u);
  EXPECT_EQ(s.train.c, 3);
  EXPECT_EQ(s.train.h, 32);
  EXPECT_EQ(s.train.classes, 10);
  for (std::size_t i = 0; i < 15; ++i) {
    EXPECT_EQ(s.train.labels[i], static_cast<int32_t>(i % 10));
    for (std::size_t j : {0u, 1023u, 1024u, 3071u})
      ASSERT_FLOAT_EQ(s.train.images[i * 3072 + j], (px(i, j) / 255.0f - 0.5f) / 0.5f) << i << "," << j;
  }
  EXPECT_FLOAT_EQ(s.test.images[5], (px(1000, 5) / 255.0f - 0.5f) / 0.5f);
  // load_dataset detects the format, also in the tarball's cifar-10-batches-bin/ subfolder
  EXPECT_EQ(load_dataset(d.str()).train.size(), 15u);
  TempDir outer;
  fs::create_directory(outer / "cifar-10-batches-bin");
  for (const auto& e : fs::directory_iterator(d.str())) fs::copy(e.path(), fs::path(outer / "cifar-10-batches-bin") / e.path().filename());
  EXPECT_EQ(load_dataset(outer.str()).test.size(), 3u);
}

TEST(Data, Cifar10BadInput) {
  {
    TempDir d;
    write_cifar(d, 2);
    fs::remove(d / "data_batch_3.bin");
    const std::string m = input_error([&] { load_cifar10(d.str()); });
    EXPECT_NE(m.find("data_batch_3.bin"), std::string::npos) << m;
    EXPECT_NE(m.find("missing"), std::string::npos) << m;
  }
  {
    TempDir d;
    write_cifar(d, 2);
    Bytes b = cifar_batch(2, 0);
    b.resize(b.size() - 100);  // truncated last record
    write_file(d / "test_batch.bin", b);
    const std::string m = input_error([&] { load_dataset(d.str()); });
    EXPECT_NE(m.find("test_batch.bin"), std::string::npos) << m;
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  }
  {
    TempDir d;
    write_cifar(d, 2);
    Bytes b = cifar_batch(2, 0);
    b[3073] = 200;  // label out of range: not CIFAR-10
    write_file(d / "data_batch_2.bin", b);
    EXPECT_NE(input_error([&] { load_cifar10(d.str()); }).find("data_batch_2.bin"), std::string::npos);
  }
  {
    TempDir d;
    write_cifar(d, 1);
    write_file(d / "data_batch_4.bin", {});
    EXPECT_NE(input_error([&] { load_cifar10(d.str()); }).find("data_batch_4.bin"), std::string::npos);
  }
}

TEST(Data, MnistIdxPlainAndGz) {
  for (bool gz : {false, true}) {
    TempDir d;
    write_mnist(d, gz);
    const Split s = load_mnist_idx(d.str());
    ASSERT_EQ(s.train.size(), 20u) << "gz=" << gz;
    ASSERT_EQ(s.test.size(), 7u);
    EXPECT_EQ(s.train.c, 1);
    EXPECT_EQ(s.train.h, 28);
    EXPECT_EQ(s.train.w, 28);
    EXPECT_EQ(s.train.classes, 10);
    EXPECT_EQ(s.test.labels[0], 3);
    for (std::size_t i = 0; i < 20; ++i)
      for (std::size_t j : {0u, 100u, 783u}) ASSERT_FLOAT_EQ(s.train.images[i * 784 + j], px(i, j) / 255.0f);
    EXPECT_EQ(load_dataset(d.str()).train.size(), 20u);
  }
  // non-square images are fine as long as train and test agree
  TempDir d;
  write_mnist(d, true, 5, 9);
  const Split s = load_mnist_idx(d.str());
  EXPECT_EQ(s.train.h, 5);
  EXPECT_EQ(s.train.w, 9);
}

TEST(Data, MnistIdxBadInput) {
  {  // missing file
    TempDir d;
    write_mnist(d, false);
    fs::remove(d / "t10k-labels-idx1-ubyte");
    const std::string m = input_error([&] { load_mnist_idx(d.str()); });
    EXPECT_NE(m.find("t10k-labels-idx1-ubyte"), std::string::npos) << m;
  }
  {  // wrong magic
    TempDir d;
    write_mnist(d, false);
    Bytes b = idx_images(20, 28, 28);
    b[3] = 0x01;
    write_file(d / "train-images-idx3-ubyte", b);
    const std::string m = input_error([&] { load_mnist_idx(d.str()); });
    EXPECT_NE(m.find("train-images-idx3-ubyte"), std::string::npos) << m;
    EXPECT_NE(m.find("magic"), std::string::npos) << m;
  }
  {  // truncated plain file
    TempDir d;
    write_mnist(d, false);
    Bytes b = idx_images(20, 28, 28);
    b.resize(b.size() - 1);
    write_file(d / "train-images-idx3-ubyte", b);
    const std::string m = input_error([&] { load_mnist_idx(d.str()); });
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  }
  {  // truncated gzip stream
    TempDir d;
    write_mnist(d, true);
    const std::string p = d / "train-images-idx3-ubyte.gz";
    const auto full = fs::file_size(p);
    fs::resize_file(p, full / 2);
    const std::string m = input_error([&] { load_mnist_idx(d.str()); });
    EXPECT_NE(m.find("train-images-idx3-ubyte.gz"), std::string::npos) << m;
  }
  {  // header dimensions disagree with the size
    TempDir d;
    write_mnist(d, false);
    Bytes b = idx_images(20, 28, 28);
    b.insert(b.end(), 50, 0);
    write_file(d / "train-images-idx3-ubyte", b);
    EXPECT_NE(input_error([&] { load_mnist_idx(d.str()); }).find("dimensions"), std::string::npos);
  }
  {  // label count != image count
    TempDir d;
    write_mnist(d, false);
    write_file(d / "train-labels-idx1-ubyte", idx_labels(19));
    EXPECT_NE(input_error([&] { load_mnist_idx(d.str()); }).find("train-labels-idx1-ubyte"), std::string::npos);
  }
  {  // train and test image sizes differ
    TempDir d;
    write_mnist(d, false);
    write_file(d / "t10k-images-idx3-ubyte", idx_images(7, 14, 14));
    EXPECT_FALSE(input_error([&] { load_mnist_idx(d.str()); }).empty());
  }
}

TEST(Data, LoadDatasetBadSpecs) {
  TempDir junk;
  write_file(junk / "readme.txt", {'h', 'i'});
  write_file(junk / "data.bin", Bytes(5000, 7));
  EXPECT_NE(input_error([&] { load_dataset(junk.str()); }).find(junk.str()), std::string::npos);
  EXPECT_NE(input_error([&] { load_dataset(junk / "nope"); }).find("nope"), std::string::npos);
  EXPECT_NE(input_error([&] { load_dataset(junk / "readme.txt"); }).find("readme.txt"), std::string::npos);
  EXPECT_FALSE(input_error([&] { load_cifar10(junk.str()); }).empty());
  EXPECT_FALSE(input_error([&] { load_mnist_idx(junk.str()); }).empty());
}

TEST(Data, FashionMnistPackage) {
  const std::string dir = find_fashion_mnist();
  if (dir.empty()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  EXPECT_TRUE(fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz"));
  const Split s = load_dataset("fashion-mnist");
  EXPECT_EQ(s.train.size(), 60000u);
  EXPECT_EQ(s.test.size(), 10000u);
  EXPECT_EQ(s.train.h, 28);
  EXPECT_EQ(s.train.name, "fashion-mnist");
  std::vector<int> count(10, 0);
  for (int32_t l : s.test.labels) ++count[l];
  for (int k = 0; k < 10; ++k) EXPECT_EQ(count[k], 1000) << "class " << k;  // Fashion-MNIST's test split is balanced
  const double mean = std::accumulate(s.train.images.begin(), s.train.images.end(), 0.0) / s.train.images.size();
  EXPECT_NEAR(mean, 0.286, 0.01);  // the well-known Fashion-MNIST pixel mean (x/255)
}
