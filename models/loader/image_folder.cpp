// An image folder as torchvision's ImageFolder reads it (see source.h): the classes are the
// subfolders in sorted order, a class's samples its files (searched recursively, links followed)
// whose names end in one of ImageFolder's extensions, in sorted order of folder then name. Each
// sample is read (kernels/common/safe_file.h) and decoded (codec.h) when asked for; the decoder is
// picked by the file's first bytes, as Pillow does, not by its name.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>

#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"
#include "models/loader/source.h"

namespace dlb::models::loader {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxImageFile = std::uint64_t(64) << 20;
constexpr int kMaxDepth = 16;  // folder nesting under a class (a link cycle stops here)
constexpr std::size_t kMaxFiles = std::size_t(1) << 24;

// ImageFolder's IMG_EXTENSIONS, compared in lower case.
bool image_name(const std::string& name) {
  std::string n = name;
  for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* e : {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}) {
    const std::string ext = e;
    if (n.size() >= ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class FolderSource : public Source {
 public:
  explicit FolderSource(const std::string& dir) {
    format_ = Format::image_folder;
    path_ = dir;
  }
  SampleView sample(std::size_t i, SampleScratch& s, StageTimes* t) const override {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      s.file = read_file_safely(files_[i], kMaxImageFile);
    } catch (const InputError& e) {  // "PATH: why" -> "dataset file PATH (sample i): why"
      std::string why = e.what();
      if (why.compare(0, files_[i].size() + 2, files_[i] + ": ") == 0) why.erase(0, files_[i].size() + 2);
      throw InputError("dataset file " + files_[i] + " (sample " + std::to_string(i) + "): " + why);
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (t) t->read += std::chrono::duration<double>(t1 - t0).count();
    const auto* p = reinterpret_cast<const std::uint8_t*>(s.file.data());
    try {
      if (s.file.size() >= 8 && p[0] == 0x89 && p[1] == 'P' && p[2] == 'N' && p[3] == 'G')
        png_decode(p, s.file.size(), &s.image, w_, h_);
      else if (s.file.size() >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        jpeg_decode(p, s.file.size(), &s.image, w_, h_);
      else
        throw InputError("neither a PNG nor a JPEG file (the formats dlbench decodes)");
    } catch (const InputError& e) {
      throw InputError("dataset file " + files_[i] + " (sample " + std::to_string(i) + "): " + e.what());
    }
    if (t) t->decode += seconds_since(t1);
    return SampleView{s.image.rgb.data(), 3, s.image.h, s.image.w, 1, std::ptrdiff_t(s.image.w) * 3, 3};
  }

  void scan() {
    std::error_code ec;
    std::vector<std::string> classes;
    for (const auto& e : fs::directory_iterator(path_, ec))
      if (e.is_directory(ec)) classes.push_back(e.path().filename().string());
    if (ec) throw InputError("dataset folder " + path_ + ": cannot be listed (" + ec.message() + ")");
    std::sort(classes.begin(), classes.end());
    if (classes.empty())
      throw InputError("dataset folder " + path_ + ": no class folders (an image folder holds one folder of images per class)");
    int pngs = 0, jpegs = 0;
    for (std::size_t k = 0; k < classes.size(); ++k) {
      std::map<std::string, std::vector<std::string>> by_folder;  // sorted folder -> names
      walk(fs::path(path_) / classes[k], 0, by_folder);
      std::size_t found = 0;
      for (auto& [folder, names] : by_folder) {
        std::sort(names.begin(), names.end());
        for (const auto& n : names) {
          files_.push_back((fs::path(folder) / n).string());
          labels_.push_back(static_cast<std::int32_t>(k));
          const std::string ext = fs::path(n).extension().string();
          (ext == ".png" || ext == ".PNG" ? pngs : jpegs) += 1;
          ++found;
        }
      }
      if (files_.size() > kMaxFiles) throw InputError("dataset folder " + path_ + ": more than " + std::to_string(kMaxFiles) + " images");
      if (found == 0)
        throw InputError("dataset folder " + (fs::path(path_) / classes[k]).string() +
                         ": no images (ImageFolder's extensions: .png .jpg .jpeg .ppm .bmp .pgm .tif .tiff .webp)");
    }
    class_names_ = classes;
    decode_ = pngs && jpegs ? "png+jpeg" : pngs ? "png" : "jpeg";
    // The first sample fixes the shape every other one must have (no resize transform).
    SampleScratch s;
    const SampleView v = sample(0, s, nullptr);
    c_ = v.c, h_ = v.h, w_ = v.w;
  }

 private:
  void walk(const fs::path& dir, int depth, std::map<std::string, std::vector<std::string>>& out) {
    if (depth > kMaxDepth) throw InputError("dataset folder " + dir.string() + ": nested deeper than 16 folders (a link cycle?)");
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) throw InputError("dataset folder " + dir.string() + ": cannot be listed (" + ec.message() + ")");
    for (const auto& e : it) {
      const std::string name = e.path().filename().string();
      if (e.is_directory(ec)) walk(e.path(), depth + 1, out);
      else if (image_name(name)) out[dir.string()].push_back(name);
    }
  }
  std::vector<std::string> files_;
};

}  // namespace

std::unique_ptr<Source> open_image_folder(const std::string& dir) {
  auto src = std::make_unique<FolderSource>(dir);
  src->scan();
  return src;
}

}  // namespace dlb::models::loader
