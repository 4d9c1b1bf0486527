// CIFAR-10 batches read whole into memory as their 8-bit rows (see source.h): the python version
// (pickled dicts: "data" a uint8 array of n x 3072, "labels" a list; batches.meta names the classes)
// and the binary version (records of a label byte and 3072 pixel bytes). Rows are planar R, G, B.
#include <filesystem>

#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"
#include "models/loader/pickle.h"
#include "models/loader/source.h"

namespace dlb::models::loader {

namespace fs = std::filesystem;

namespace {

constexpr int kC = 3, kH = 32, kW = 32;
constexpr std::size_t kRow = kC * kH * kW;  // 3072 bytes per image
// A real batch file is 30 MB; the whole train set 150 MB of pixels. Caps well above both.
constexpr std::uint64_t kMaxBatchFile = std::uint64_t(1) << 30;
constexpr std::size_t kMaxImages = std::size_t(1) << 22;  // 4M images, 12 GiB of pixels

class RawSource : public Source {
 public:
  RawSource(Format f, const std::string& dir) {
    format_ = f, path_ = dir, c_ = kC, h_ = kH, w_ = kW;
    class_names_ = cifar10_classes();
  }
  SampleView sample(std::size_t i, SampleScratch&, StageTimes*) const override {
    return SampleView{pixels_.data() + i * kRow, kC, kH, kW, kH * kW, kW, 1};
  }
  void add(const std::uint8_t* rows, std::size_t n, const std::string& file) {
    if (labels_.size() + n > kMaxImages)
      throw InputError("dataset " + path_ + ": more than " + std::to_string(kMaxImages) + " images (at " + file + ")");
    pixels_.insert(pixels_.end(), rows, rows + n * kRow);
  }
  std::vector<std::int32_t>& labels() { return labels_; }
  std::vector<std::string>& names() { return class_names_; }

 private:
  std::vector<std::uint8_t> pixels_;
};

std::vector<std::string> split_files(const std::string& dir, const std::string& split, const char* suffix) {
  std::vector<std::string> files;
  if (split == "train")
    for (int b = 1; b <= 5; ++b) files.push_back((fs::path(dir) / ("data_batch_" + std::to_string(b) + suffix)).string());
  else if (split == "test")
    files.push_back((fs::path(dir) / (std::string("test_batch") + suffix)).string());
  else
    throw UsageError("split '" + split + "': expected train or test");
  return files;
}

void check_label(std::int64_t v, int classes, const std::string& file, std::size_t record) {
  if (v < 0 || v >= classes)
    throw InputError("dataset file " + file + ": record " + std::to_string(record) + " has label " + std::to_string(v) +
                     ", outside the " + std::to_string(classes) + " classes");
}

// An integer list, or a 1-D integer ndarray (little-endian, 1 to 8 bytes), as int64s.
std::vector<std::int64_t> int_values(const Unpickled& u, const PyObj& v, const std::string& file, const char* key) {
  std::vector<std::int64_t> out;
  if (v.kind == PyObj::list) {
    out.reserve(v.items.size());
    for (std::uint32_t k : v.items) {
      const PyObj& x = u.at(k);
      if (x.kind != PyObj::integer) throw InputError("dataset file " + file + ": '" + key + "' holds a value that is not an integer");
      out.push_back(x.i);
    }
    return out;
  }
  if (v.kind == PyObj::ndarray && v.shape.size() == 1 && v.dtype.size() >= 3 && v.dtype[0] != '>' &&
      (v.dtype[1] == 'i' || v.dtype[1] == 'u')) {
    const std::size_t item = v.s.size() / std::max<std::int64_t>(1, v.shape[0]);
    const bool is_signed = v.dtype[1] == 'i';
    for (std::int64_t k = 0; k < v.shape[0]; ++k) {
      std::uint64_t x = 0;
      for (std::size_t b = 0; b < item; ++b) x |= std::uint64_t(static_cast<unsigned char>(v.s[k * item + b])) << (8 * b);
      if (is_signed && item < 8 && (x >> (8 * item - 1)) & 1) x |= ~std::uint64_t(0) << (8 * item);
      out.push_back(static_cast<std::int64_t>(x));
    }
    return out;
  }
  throw InputError("dataset file " + file + ": '" + key + "' is neither a list of integers nor an integer array");
}

}  // namespace

const std::vector<std::string>& cifar10_classes() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird", "cat", "deer",
                                                 "dog", "frog", "horse", "ship", "truck"};
  return names;
}

std::unique_ptr<Source> open_cifar_python(const std::string& dir, const std::string& split) {
  auto src = std::make_unique<RawSource>(Format::cifar_python, dir);
  const std::string meta = (fs::path(dir) / "batches.meta").string();
  std::error_code ec;
  if (fs::exists(meta, ec)) {
    const std::string what = "dataset file " + meta;
    const Unpickled u = unpickle(read_file_safely(meta, 1 << 20), what);
    const PyObj* names = u.get(u.at(u.root), "label_names");
    if (!names) names = u.get(u.at(u.root), "fine_label_names");
    if (!names || names->kind != PyObj::list || names->items.empty() || names->items.size() > 100000)
      throw InputError(what + ": no list 'label_names' (not a CIFAR-10 batches.meta)");
    src->names().clear();
    for (std::uint32_t k : names->items) {
      const PyObj& n = u.at(k);
      if (n.kind != PyObj::str && n.kind != PyObj::bytes) throw InputError(what + ": a class name is not a string");
      src->names().push_back(n.s);
    }
  }
  const int classes = static_cast<int>(src->names().size());
  for (const std::string& file : split_files(dir, split, "")) {
    const std::string what = "dataset file " + file;
    const Unpickled u = unpickle(read_file_safely(file, kMaxBatchFile), what);
    const PyObj& root = u.at(u.root);
    if (root.kind != PyObj::dict) throw InputError(what + ": not a pickled dict (not a CIFAR-10 python batch)");
    const PyObj* data = u.get(root, "data");
    const PyObj* labels = u.get(root, "labels");
    const char* label_key = "labels";
    if (!labels) labels = u.get(root, "fine_labels"), label_key = "fine_labels";
    if (!data || !labels) throw InputError(what + ": no 'data' and 'labels' (not a CIFAR-10 python batch)");
    if (data->kind != PyObj::ndarray || data->shape.size() != 2 || data->dtype.substr(1) != "u1" ||
        data->shape[1] != static_cast<std::int64_t>(kRow))
      throw InputError(what + ": 'data' is not a uint8 array of rows of 3072 bytes (3x32x32)");
    const std::vector<std::int64_t> lab = int_values(u, *labels, file, label_key);
    if (static_cast<std::int64_t>(lab.size()) != data->shape[0])
      throw InputError(what + ": " + std::to_string(lab.size()) + " labels for " + std::to_string(data->shape[0]) + " images");
    for (std::size_t r = 0; r < lab.size(); ++r) check_label(lab[r], classes, file, r);
    src->add(reinterpret_cast<const std::uint8_t*>(data->s.data()), lab.size(), file);
    src->labels().insert(src->labels().end(), lab.begin(), lab.end());
  }
  return src;
}

std::unique_ptr<Source> open_cifar_binary(const std::string& dir, const std::string& split) {
  auto src = std::make_unique<RawSource>(Format::cifar_binary, dir);
  const int classes = static_cast<int>(src->names().size());
  std::vector<std::uint8_t> rows;
  for (const std::string& file : split_files(dir, split, ".bin")) {
    const std::string bytes = read_file_safely(file, kMaxBatchFile);
    if (bytes.empty() || bytes.size() % (kRow + 1) != 0)
      throw InputError("dataset file " + file + ": truncated or not CIFAR-10 binary (" + std::to_string(bytes.size()) +
                       " bytes is not a whole number of 3073-byte records)");
    const std::size_t n = bytes.size() / (kRow + 1);
    rows.resize(n * kRow);
    std::vector<std::int32_t> lab(n);
    for (std::size_t r = 0; r < n; ++r) {
      const auto* rec = reinterpret_cast<const std::uint8_t*>(bytes.data()) + r * (kRow + 1);
      check_label(rec[0], classes, file, r);
      lab[r] = rec[0];
      std::copy(rec + 1, rec + 1 + kRow, rows.data() + r * kRow);
    }
    src->add(rows.data(), n, file);
    src->labels().insert(src->labels().end(), lab.begin(), lab.end());
  }
  return src;
}

}  // namespace dlb::models::loader
