// Datasets for the training suites: seeded synthetic CIFAR-shaped data (the default, nothing is
// downloaded), CIFAR-10 binary batches, MNIST/Fashion-MNIST IDX files (plain or gzipped), and the
// Debian package dataset-fashion-mnist. Images are float NCHW, normalized like the seeds' transforms:
// CIFAR (x/255 - 0.5)/0.5 in [-1, 1]; MNIST x/255 in [0, 1] (seed 003 uses ToTensor() alone).
// Every problem with a file or folder throws dlb::InputError with one line naming it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models {

struct Dataset {
  std::string name;
  int c = 0, h = 0, w = 0, classes = 0;
  std::vector<float> images;    // size() * c * h * w floats, NCHW
  std::vector<int32_t> labels;  // in [0, classes)
  std::size_t size() const { return labels.size(); }
};

struct Split {
  Dataset train, test;
};

// 3x32x32, 10 classes; deterministic for a seed. Each class has its own smooth colour pattern and
// every image is that pattern plus pixel noise, quantized to 8 bits and normalized like CIFAR, so a
// model can learn it (well above 10% accuracy) but not in one step.
Split synthetic_cifar10(std::size_t n_train, std::size_t n_test, std::uint64_t seed);

// The same images as their 8-bit pixels, as the CIFAR-10 files hold them (per image 3072 bytes: the
// planes R, G, B of 32x32), for writing datasets to disk (models/loader/make.h): synthetic_cifar10's
// floats are these bytes normalized. A null pointer skips that split.
struct ByteImages {
  std::vector<std::uint8_t> pixels;  // size() * 3072
  std::vector<std::int32_t> labels;
  std::size_t size() const { return labels.size(); }
};
void synthetic_cifar10_bytes(std::size_t n_train, std::size_t n_test, std::uint64_t seed, ByteImages* train, ByteImages* test);

// CIFAR-10 binary version: dir/data_batch_1.bin .. data_batch_5.bin and dir/test_batch.bin, each a
// sequence of 3073-byte records (label byte, then 3x32x32 pixel bytes, channel planes R, G, B).
Split load_cifar10(const std::string& dir);

// MNIST-style IDX: dir/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte, each either plain or with a .gz suffix (read through zlib).
Split load_mnist_idx(const std::string& dir);

// Folder of the Debian package dataset-fashion-mnist (from `dpkg -L`), or "" if it is not installed.
std::string find_fashion_mnist();

// "synthetic" (50,000 + 10,000 images, seed 0), "fashion-mnist" (the Debian package), or a folder
// holding CIFAR-10 binary batches (also its cifar-10-batches-bin/ subfolder) or MNIST IDX files.
Split load_dataset(const std::string& spec);

}  // namespace dlb::models
