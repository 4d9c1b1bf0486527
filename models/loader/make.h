// `dlbench data make cifar10 DIR`: a seeded synthetic CIFAR-10 (models/data.h's generator, as 8-bit
// pixels) written in the forms users have the real one: DIR/cifar-10-batches-py/ (python batches, as
// torchvision's download leaves them), DIR/cifar-10-batches-bin/ (binary batches), DIR/cifar10-png/
// and DIR/cifar10-jpeg/ (image folders: train/<class>/NNNNN.png and test/<class>/...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models::loader {

enum class DiskFormat { python, binary, png, jpeg };
DiskFormat parse_disk_format(const std::string& s);  // UsageError on anything else
const char* disk_format_name(DiskFormat f);
const char* disk_format_folder(DiskFormat f);        // "cifar-10-batches-py", ...

inline constexpr int kJpegQuality = 90;

struct MakeReport {
  std::string folder;
  std::size_t files = 0;
  std::uint64_t bytes = 0;
};

// Writes one form into dir (created if missing). The form's folder must not exist yet (InputError
// naming it); a failure to write is an InputError naming the file.
MakeReport make_cifar10(const std::string& dir, DiskFormat f, std::size_t n_train, std::size_t n_test, std::uint64_t seed);

}  // namespace dlb::models::loader
