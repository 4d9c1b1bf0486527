// Which reader a dataset folder needs (see source.h), and the names of the formats.
#include "models/loader/source.h"

#include <filesystem>

#include "kernels/common/errors.h"

namespace dlb::models::loader {

namespace fs = std::filesystem;

const char* format_name(Format f) {
  switch (f) {
    case Format::cifar_python: return "cifar10-python";
    case Format::cifar_binary: return "cifar10-binary";
    case Format::image_folder: return "image-folder";
  }
  return "?";
}

Decode parse_decode(const std::string& s) {
  if (s == "auto") return Decode::auto_;
  if (s == "none") return Decode::none;
  if (s == "png") return Decode::png;
  if (s == "jpeg" || s == "jpg") return Decode::jpeg;
  throw UsageError("decode '" + s + "': expected none, png, jpeg or auto");
}

const char* decode_name(Decode d) {
  switch (d) {
    case Decode::auto_: return "auto";
    case Decode::none: return "none";
    case Decode::png: return "png";
    case Decode::jpeg: return "jpeg";
  }
  return "?";
}

void Source::truncate(std::size_t n) {
  if (n < labels_.size()) labels_.resize(n);
}

namespace {

bool has(const fs::path& dir, const char* name) {
  std::error_code ec;
  return fs::exists(dir / name, ec);
}

// The form a folder holds by itself (no narrowing), as a Decode: none for batches, png or jpeg for
// an image folder (by its name as `data make` writes it; auto when it cannot be told).
std::unique_ptr<Source> open_as_is(const fs::path& dir, const SourceOptions& o) {
  if (has(dir, "data_batch_1") || has(dir, "test_batch")) {
    if (o.decode == Decode::png || o.decode == Decode::jpeg)
      throw UsageError(std::string("decode ") + decode_name(o.decode) + ": " + dir.string() +
                       " holds CIFAR-10 python batches (raw pixels; make images with dlbench data make --format " +
                       decode_name(o.decode) + ")");
    return open_cifar_python(dir.string(), o.split);
  }
  if (has(dir, "data_batch_1.bin") || has(dir, "test_batch.bin")) {
    if (o.decode == Decode::png || o.decode == Decode::jpeg)
      throw UsageError(std::string("decode ") + decode_name(o.decode) + ": " + dir.string() + " holds CIFAR-10 binary batches (raw pixels)");
    return open_cifar_binary(dir.string(), o.split);
  }
  if (o.decode == Decode::none)
    throw UsageError("decode none: " + dir.string() + " holds no CIFAR-10 batches (an image folder needs png or jpeg)");
  // A folder with train/ and test/ (as data make writes them): the split's.
  std::error_code ec;
  if (fs::is_directory(dir / "train", ec) && fs::is_directory(dir / "test", ec)) {
    const fs::path sub = dir / o.split;
    if (o.split != "train" && o.split != "test") throw UsageError("split '" + o.split + "': expected train or test");
    return open_image_folder(sub.string());
  }
  return open_image_folder(dir.string());
}

}  // namespace

std::unique_ptr<Source> open_source(const std::string& path, const SourceOptions& o) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError("dataset folder " + path + ": missing");
  if (!fs::is_directory(path, ec)) throw InputError("dataset " + path + ": not a folder (give the folder holding the dataset files)");
  const fs::path dir(path);
  // The layout `dlbench data make` writes (and torchvision's download: root/cifar-10-batches-py).
  const char* sub = nullptr;
  switch (o.decode) {
    case Decode::auto_:
    case Decode::none:
      sub = has(dir, "cifar-10-batches-py") ? "cifar-10-batches-py" : has(dir, "cifar-10-batches-bin") ? "cifar-10-batches-bin" : nullptr;
      if (!sub && o.decode == Decode::auto_)
        sub = has(dir, "cifar10-png") ? "cifar10-png" : has(dir, "cifar10-jpeg") ? "cifar10-jpeg" : nullptr;
      break;
    case Decode::png:
    case Decode::jpeg: {
      const char* want = o.decode == Decode::png ? "cifar10-png" : "cifar10-jpeg";
      if (has(dir, want)) sub = want;
      else if (has(dir, "cifar-10-batches-py") || has(dir, "cifar-10-batches-bin") || has(dir, "cifar10-png") || has(dir, "cifar10-jpeg"))
        throw UsageError(std::string("decode ") + decode_name(o.decode) + ": " + path + " has no " + want +
                         "/ (write it: dlbench data make cifar10 " + path + " --format " + decode_name(o.decode) + ")");
      break;
    }
  }
  return open_as_is(sub ? dir / sub : dir, o);
}

}  // namespace dlb::models::loader
