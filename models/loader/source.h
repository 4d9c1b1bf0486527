// A dataset on disk as users have it, for the loader: CIFAR-10's python batches (what torchvision's
// CIFAR10 reads), its binary batches, or an image folder (a class per subfolder, one PNG or JPEG per
// sample, what torchvision's ImageFolder reads). Batches are read whole when opened (as torchvision
// does); an image folder is scanned when opened and each sample read and decoded when asked for.
// Every problem with a file or folder is a dlb::InputError of one line naming it (and the sample).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/loader/codec.h"

namespace dlb::models::loader {

enum class Format { cifar_python, cifar_binary, image_folder };
const char* format_name(Format f);

// Which form of a dataset to read where a folder holds several (what `dlbench data make` writes):
// auto = whatever the folder is; none = raw batches (python, else binary); png / jpeg = image folders.
enum class Decode { auto_, none, png, jpeg };
Decode parse_decode(const std::string& s);  // UsageError on anything else
const char* decode_name(Decode d);

// One sample's 8-bit pixels where they lie: element (c, y, x) is p[c*sc + y*sy + x*sx]. CIFAR batch
// rows are planar (CHW), decoded images interleaved (HWC); the transform reads either.
struct SampleView {
  const std::uint8_t* p = nullptr;
  int c = 0, h = 0, w = 0;
  std::ptrdiff_t sc = 0, sy = 0, sx = 0;
};

// Seconds spent per stage (summed over samples and batches).
struct StageTimes {
  double read = 0, decode = 0, transform = 0, collate = 0, pin = 0;
  StageTimes& operator+=(const StageTimes& o) {
    read += o.read, decode += o.decode, transform += o.transform, collate += o.collate, pin += o.pin;
    return *this;
  }
};

// A reader's own buffers (one per worker): the file's bytes and the decoded image.
struct SampleScratch {
  std::string file;
  DecodedImage image;
};

class Source {
 public:
  virtual ~Source() = default;
  std::size_t size() const { return labels_.size(); }
  int label(std::size_t i) const { return labels_[i]; }
  int channels() const { return c_; }
  int height() const { return h_; }
  int width() const { return w_; }
  int classes() const { return static_cast<int>(class_names_.size()); }
  const std::vector<std::string>& class_names() const { return class_names_; }
  Format format() const { return format_; }
  const std::string& path() const { return path_; }
  // "png", "jpeg", "png+jpeg" for a folder; "none" for batches
  const std::string& decode() const { return decode_; }
  // Sample i's pixels (valid until the next call with the same scratch); read and decode times are
  // added to *t. Thread-safe for distinct scratches; usable in a forked worker.
  virtual SampleView sample(std::size_t i, SampleScratch& s, StageTimes* t) const = 0;
  // Only the first n samples (n <= size()).
  virtual void truncate(std::size_t n);

 protected:
  Format format_ = Format::cifar_python;
  std::string path_, decode_ = "none";
  int c_ = 0, h_ = 0, w_ = 0;
  std::vector<std::int32_t> labels_;
  std::vector<std::string> class_names_;
};

struct SourceOptions {
  Decode decode = Decode::auto_;
  std::string split = "train";  // train | test
};

// The folder `path` as one of the formats. A folder written by `dlbench data make` (holding
// cifar-10-batches-py/, cifar-10-batches-bin/, cifar10-png/, cifar10-jpeg/) is narrowed by
// o.decode; a folder with train/ and test/ subfolders by o.split.
std::unique_ptr<Source> open_source(const std::string& path, const SourceOptions& o);

// The formats' readers (cifar_files.cpp, image_folder.cpp).
std::unique_ptr<Source> open_cifar_python(const std::string& dir, const std::string& split);
std::unique_ptr<Source> open_cifar_binary(const std::string& dir, const std::string& split);
std::unique_ptr<Source> open_image_folder(const std::string& dir);

// CIFAR-10's class names, in label order (also the alphabetical order ImageFolder gives them).
const std::vector<std::string>& cifar10_classes();

}  // namespace dlb::models::loader
