// The loader's datasets on disk (models/loader/pickle.h, source.h, make.h): pickles our writer makes
// are what Python's pickle reads, pickles Python writes (protocols 2 to 5, numpy arrays) are what our
// reader reads; the python, binary and PNG forms of one synthetic set hold the same pixels and labels;
// every bad file or folder is an InputError naming it (and the sample).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "kernels/common/errors.h"
#include "loader_test_util.h"
#include "models/data.h"
#include "models/loader/pickle.h"
#include "models/loader/source.h"

namespace fs = std::filesystem;
using namespace dlb::models::loader;
using loader_test::TempDir;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dlb::InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

std::vector<std::uint8_t> pixels_of(const Source& s, std::size_t i) {
  SampleScratch scratch;
  const SampleView v = s.sample(i, scratch, nullptr);
  std::vector<std::uint8_t> out;
  for (int c = 0; c < v.c; ++c)
    for (int y = 0; y < v.h; ++y)
      for (int x = 0; x < v.w; ++x) out.push_back(v.p[c * v.sc + y * v.sy + x * v.sx]);
  return out;  // CHW
}

}  // namespace

TEST(LoaderPickle, WriterReaderRoundTrip) {
  std::vector<std::uint8_t> data(3 * 3072);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 + 3);
  PickleWriter w;
  w.key("data");
  w.u8_matrix(data.data(), 3, 3072);
  w.key("labels");
  w.int_list({0, 9, 70000});
  w.key("batch_label");
  w.str(std::string(300, 'x'));
  const Unpickled u = unpickle(w.finish(), "test");
  const PyObj& root = u.at(u.root);
  const PyObj* d = u.get(root, "data");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kind, PyObj::ndarray);
  EXPECT_EQ(d->shape, (std::vector<std::int64_t>{3, 3072}));
  EXPECT_EQ(d->dtype, "|u1");
  EXPECT_EQ(d->s, std::string(data.begin(), data.end()));
  const PyObj* l = u.get(root, "labels");
  ASSERT_EQ(l->items.size(), 3u);
  EXPECT_EQ(u.at(l->items[2]).i, 70000);
  EXPECT_EQ(u.get(root, "batch_label")->s.size(), 300u);
}

TEST(LoaderPickle, PythonReadsOurs) {
  if (loader_test::python().empty()) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::python}, 50);
  const std::string out = loader_test::run_python(
      "import pickle,sys\n"
      "d=pickle.load(open(sys.argv[1],'rb'),encoding='latin1')\n"
      "m=pickle.load(open(sys.argv[2],'rb'),encoding='latin1')\n"
      "print(d['data'].shape, d['data'].dtype, len(d['labels']), int(d['data'].sum()), sum(d['labels']), m['label_names'][9])\n",
      {t / "cifar-10-batches-py/data_batch_1", t / "cifar-10-batches-py/batches.meta"});
  dlb::models::ByteImages train;
  dlb::models::synthetic_cifar10_bytes(50, 0, 7, &train, nullptr);
  long long sum = 0, lsum = 0;
  for (std::size_t i = 0; i < 10 * 3072; ++i) sum += train.pixels[i];
  for (std::size_t i = 0; i < 10; ++i) lsum += train.labels[i];
  EXPECT_EQ(out, "(10, 3072) uint8 10 " + std::to_string(sum) + " " + std::to_string(lsum) + " truck\n");
}

TEST(LoaderPickle, OursReadsPythonProtocols2To5) {
  if (loader_test::python().empty()) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir t;
  // What a user who re-pickled the batches with Python 3 would have: str keys, numpy arrays (protocol
  // 5 writes them by _frombuffer, 2 through _codecs.encode), labels as a list or an int64 array.
  loader_test::run_python(
      "import pickle,sys,numpy as np\n"
      "a=(np.arange(4*3072)%251).astype(np.uint8).reshape(4,3072)\n"
      "for p in (2,3,4,5):\n"
      "  for k,lab in (('list',[3,1,4,1]),('array',np.array([3,1,4,1],dtype=np.int64))):\n"
      "    pickle.dump({'data':a,'labels':lab,'filenames':['a','b','c','d']},open(sys.argv[1]+'/p%d_%s'%(p,k),'wb'),protocol=p)\n",
      {t.str()});
  std::string want;
  for (int i = 0; i < 4 * 3072; ++i) want += static_cast<char>(i % 251);
  for (int p = 2; p <= 5; ++p)
    for (const char* k : {"list", "array"}) {
      const std::string file = t / ("p" + std::to_string(p) + "_" + k);
      const Unpickled u = unpickle(loader_test::read_bytes(file), file);
      const PyObj* d = u.get(u.at(u.root), "data");
      ASSERT_NE(d, nullptr) << file;
      EXPECT_EQ(d->s, want) << file;
      EXPECT_EQ(d->shape, (std::vector<std::int64_t>{4, 3072})) << file;
    }
  // The whole reader path: a folder of Python-3 protocol-4 batches with int64 label arrays.
  fs::create_directories(t / "py3");
  loader_test::run_python(
      "import pickle,sys,numpy as np\n"
      "for i,n in enumerate(['data_batch_%d'%b for b in range(1,6)]+['test_batch']):\n"
      "  a=np.full((2,3072),i,np.uint8)\n"
      "  pickle.dump({'data':a,'labels':np.array([i%10,9],dtype=np.int64)},open(sys.argv[1]+'/'+n,'wb'),protocol=4)\n",
      {t / "py3"});
  const auto src = open_cifar_python(t / "py3", "train");
  ASSERT_EQ(src->size(), 10u);
  EXPECT_EQ(src->label(8), 4);
  EXPECT_EQ(src->label(9), 9);
  EXPECT_EQ(pixels_of(*src, 8)[100], 4);
}

TEST(LoaderPickle, HostileInputIsRefused) {
  PickleWriter w;
  w.key("data");
  std::vector<std::uint8_t> row(3072, 1);
  w.u8_matrix(row.data(), 1, 3072);
  const std::string good = w.finish();
  for (std::size_t cut : {std::size_t(1), std::size_t(40), good.size() / 2, good.size() - 1})
    EXPECT_NE(error_of([&] { unpickle(good.substr(0, cut), "f"); }).find("f: "), std::string::npos) << cut;
  EXPECT_NE(error_of([&] { unpickle("\x80\x02" "cos\nsystem\n(U\x02lstR.", "evil"); }).find("refers to os.system"), std::string::npos);
  EXPECT_NE(error_of([&] { unpickle("\x80\x02\xff.", "x"); }).find("unsupported pickle opcode 0xff"), std::string::npos);
  EXPECT_NE(error_of([&] { unpickle("\x80\x02h\x05.", "x"); }).find("memo 5 was never stored"), std::string::npos);
  EXPECT_NE(error_of([&] { unpickle("\x80\x02s.", "x"); }).find("stack underflow"), std::string::npos);
  // A list appended to itself: held by index, freed without recursion.
  const Unpickled u = unpickle(std::string("\x80\x02]q\x00h\x00" "a.", 9), "cycle");
  EXPECT_EQ(u.at(u.root).items.size(), 1u);
}

TEST(LoaderSources, AllFormsHoldTheSameSamples) {
  TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::python, DiskFormat::binary, DiskFormat::png, DiskFormat::jpeg});
  SourceOptions o;
  const auto py = open_source(t.str(), o);  // auto: the python batches first
  EXPECT_EQ(py->format(), Format::cifar_python);
  o.decode = Decode::none;
  const auto bin = open_source(t / "cifar-10-batches-bin", o);
  o.decode = Decode::png;
  const auto png = open_source(t.str(), o);
  o.decode = Decode::jpeg;
  const auto jpg = open_source(t.str(), o);
  ASSERT_EQ(py->size(), 240u);
  ASSERT_EQ(bin->size(), 240u);
  ASSERT_EQ(png->size(), 240u);
  EXPECT_EQ(png->format(), Format::image_folder);
  EXPECT_EQ(png->decode(), "png");
  EXPECT_EQ(jpg->decode(), "jpeg");
  EXPECT_EQ(png->class_names(), cifar10_classes());
  // The folder's order is class-major (ImageFolder's): sample i of the batches is the file
  // <class>/<i>.png; its pixels are the same bytes (PNG is lossless), the JPEG's close to them.
  std::map<std::pair<int, int>, std::size_t> by_class_rank;
  std::vector<int> seen(10, 0);
  for (std::size_t i = 0; i < py->size(); ++i) by_class_rank[{py->label(i), seen[py->label(i)]++}] = i;
  std::vector<int> rank(10, 0);
  double jpeg_err = 0;
  for (std::size_t j = 0; j < png->size(); ++j) {
    const int k = png->label(j);
    const std::size_t i = by_class_rank.at({k, rank[k]++});
    ASSERT_EQ(pixels_of(*py, i), pixels_of(*bin, i));
    ASSERT_EQ(bin->label(i), k);
    ASSERT_EQ(pixels_of(*png, j), pixels_of(*py, i)) << "png sample " << j;
    const auto a = pixels_of(*jpg, j), b = pixels_of(*py, i);
    for (std::size_t q = 0; q < a.size(); ++q) jpeg_err += std::abs(int(a[q]) - int(b[q]));
  }
  jpeg_err /= 240.0 * 3072;
  EXPECT_GT(jpeg_err, 0.5);  // lossy (the images are mostly pixel noise),
  EXPECT_LT(jpeg_err, 30);   // but the same images (another image of the set is ~60 away)
  o.split = "test";
  o.decode = Decode::auto_;
  EXPECT_EQ(open_source(t.str(), o)->size(), 48u);
}

TEST(LoaderSources, BadFilesAndFoldersNameThemselves) {
  TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::binary, DiskFormat::python, DiskFormat::png});
  SourceOptions o;
  // a label outside the classes: binary and python
  const std::string bin = t / "cifar-10-batches-bin/data_batch_2.bin";
  std::string b = loader_test::read_bytes(bin);
  b[3073 * 5] = 12;
  loader_test::write_bytes(bin, b);
  EXPECT_NE(error_of([&] { open_cifar_binary(t / "cifar-10-batches-bin", "train"); })
                .find("data_batch_2.bin: record 5 has label 12, outside the 10 classes"),
            std::string::npos);
  PickleWriter w;
  std::vector<std::uint8_t> rows(2 * 3072, 0);
  w.key("data");
  w.u8_matrix(rows.data(), 2, 3072);
  w.key("labels");
  w.int_list({1, 10});
  loader_test::write_bytes(t / "cifar-10-batches-py/data_batch_3", w.finish());
  EXPECT_NE(error_of([&] { open_cifar_python(t / "cifar-10-batches-py", "train"); }).find("data_batch_3: record 1 has label 10"),
            std::string::npos);
  // truncated binary, garbage python
  loader_test::write_bytes(t / "cifar-10-batches-bin/test_batch.bin", std::string(3000, '\0'));
  EXPECT_NE(error_of([&] { open_cifar_binary(t / "cifar-10-batches-bin", "test"); }).find("test_batch.bin: truncated"), std::string::npos);
  loader_test::write_bytes(t / "cifar-10-batches-py/test_batch", "garbage");
  EXPECT_NE(error_of([&] { open_cifar_python(t / "cifar-10-batches-py", "test"); }).find("test_batch: "), std::string::npos);
  // image folders: no class folders, an empty class, a corrupt and a truncated image, an unreadable one
  fs::create_directories(t / "empty");
  EXPECT_NE(error_of([&] { open_source(t / "empty", o); }).find("no class folders"), std::string::npos);
  const std::string train = t / "cifar10-png/train";
  fs::create_directories(train + "/zebra");
  EXPECT_NE(error_of([&] { open_image_folder(train); }).find("zebra: no images"), std::string::npos);
  fs::remove(train + "/zebra");
  const auto src = open_image_folder(train);
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(train))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());  // sample order: class folders sorted, names sorted
  const std::string png = loader_test::read_bytes(files[3]);
  std::string bad = png;
  bad[bad.size() / 2] ^= 0x55;
  loader_test::write_bytes(files[3], bad);
  loader_test::write_bytes(files[4], png.substr(0, png.size() / 2));
  fs::remove(files[5]);
  fs::create_symlink(t / "nowhere.png", files[5]);
  SampleScratch s;
  EXPECT_NE(error_of([&] { src->sample(3, s, nullptr); }).find(files[3] + " (sample 3): corrupt PNG"), std::string::npos)
      << error_of([&] { src->sample(3, s, nullptr); });
  EXPECT_NE(error_of([&] { src->sample(4, s, nullptr); }).find(files[4] + " (sample 4): corrupt PNG: truncated"), std::string::npos)
      << error_of([&] { src->sample(4, s, nullptr); });
  EXPECT_NE(error_of([&] { src->sample(5, s, nullptr); }).find(files[5] + " (sample 5): cannot be read"), std::string::npos)
      << error_of([&] { src->sample(5, s, nullptr); });
  // a JPEG that is not one, and an image of another size
  loader_test::write_bytes(files[6], "\xFF\xD8\xFFgarbage");
  EXPECT_NE(error_of([&] { src->sample(6, s, nullptr); }).find("(sample 6): corrupt JPEG"), std::string::npos);
  const std::string big = png_encode(std::vector<std::uint8_t>(64 * 48 * 3, 9).data(), 64, 48);
  loader_test::write_bytes(files[7], big);
  EXPECT_NE(error_of([&] { src->sample(7, s, nullptr); }).find("image is 64x48, the dataset's images are 32x32"), std::string::npos);
  // decode asked for a form the folder does not have
  o.decode = Decode::jpeg;
  EXPECT_THROW(open_source(t.str(), o), dlb::UsageError);
}

TEST(LoaderSources, MakeRefusesAnExistingForm) {
  TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::binary}, 20);
  EXPECT_NE(error_of([&] { make_cifar10(t.str(), DiskFormat::binary, 20, 4, 7); }).find("exists already"), std::string::npos);
}
