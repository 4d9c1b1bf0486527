// The loader's decoders (models/loader/codec.h) against Pillow, on files Pillow (or a plain PNG
// writer in Python) makes: Image.open(f).convert("RGB") is what torchvision's ImageFolder reads, and
// ours must give the same pixels: exactly for PNG (every color type and bit depth Pillow converts the
// way libpng does), for JPEG within the IDCT's accuracy bound (ISO/IEC 10918-2: one unit per sample;
// with the same libjpeg-turbo as Pillow and the same defaults it is exact). Also our encoders' files
// decode, in Pillow, to what we wrote.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/common/errors.h"
#include "loader_test_util.h"
#include "models/loader/codec.h"

using namespace dlb::models::loader;
using loader_test::TempDir;

namespace {

// Python: every case as NAME.png/.jpg plus NAME.rgb (Pillow's convert("RGB") bytes) and NAME.size.
const char* kMakeCases = R"PY(
import io, struct, sys, zlib, random
from PIL import Image
out = sys.argv[1]
random.seed(3)
def noise(mode, w, h):
    n = {'1': 1, 'L': 1, 'LA': 2, 'P': 1, 'RGB': 3, 'RGBA': 4}[mode]
    return Image.frombytes(mode if mode != '1' else 'L', (w, h), bytes(random.randrange(256) for _ in range(w * h * n)))
def save(name, im, **kw):
    ext = 'jpg' if kw.pop('jpeg', False) else 'png'
    im.save(f'{out}/{name}.{ext}', **kw)
    dump(name, f'{out}/{name}.{ext}')
def dump(name, path):
    im = Image.open(path).convert('RGB')
    open(f'{out}/{name}.rgb', 'wb').write(im.tobytes())
    open(f'{out}/{name}.size', 'w').write('%d %d' % im.size)
def raw_png(name, w, h, depth, ctype, rows):  # a PNG written by hand: depths Pillow cannot save
    chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    data = b''.join(b'\0' + r for r in rows)
    png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, ctype, 0, 0, 0)) + \
          chunk(b'IDAT', zlib.compress(data)) + chunk(b'IEND', b'')
    open(f'{out}/{name}.png', 'wb').write(png)
    dump(name, f'{out}/{name}.png')
rb = lambda n: bytes(random.randrange(256) for _ in range(n))
save('rgb', noise('RGB', 32, 32))
save('rgb_odd', noise('RGB', 37, 21))
save('rgba', noise('RGBA', 32, 32))
save('gray', noise('L', 32, 32))
save('gray_alpha', noise('LA', 19, 23))
p = noise('P', 32, 32); p.putpalette(rb(768)); p.info['transparency'] = 5
save('palette_trns', p)
save('bilevel', noise('L', 33, 17).convert('1'))
save('gray_best_compression', noise('L', 32, 32), compress_level=9)
raw_png('rgb16', 13, 11, 16, 2, [rb(13 * 6) for _ in range(11)])
raw_png('rgba16', 9, 7, 16, 6, [rb(9 * 8) for _ in range(7)])
raw_png('gray2', 16, 5, 2, 0, [rb(4) for _ in range(5)])
raw_png('gray4', 16, 5, 4, 0, [rb(8) for _ in range(5)])
img = noise('RGB', 32, 32)
smooth = Image.radial_gradient('L').resize((32, 32)).convert('RGB')
save('jpeg_q90', img, jpeg=True, quality=90)
save('jpeg_q75_444', img, jpeg=True, quality=75, subsampling=0)
save('jpeg_smooth', smooth, jpeg=True, quality=95)
save('jpeg_gray', noise('L', 32, 32), jpeg=True, quality=85)
save('jpeg_progressive_odd', noise('RGB', 37, 21), jpeg=True, quality=80, progressive=True)
)PY";

struct Case {
  const char* name;
  bool jpeg;
};

DecodedImage decode(const std::string& bytes, bool jpeg) {
  DecodedImage d;
  const auto* p = reinterpret_cast<const std::uint8_t*>(bytes.data());
  if (jpeg) jpeg_decode(p, bytes.size(), &d);
  else png_decode(p, bytes.size(), &d);
  return d;
}

}  // namespace

TEST(LoaderCodec, DecodesAsPillowDoes) {
  if (loader_test::python().empty()) GTEST_SKIP() << "no /usr/bin/python3";
  int status = 0;
  const std::string probe = loader_test::run_python("import PIL", {}, &status);
  if (status != 0) GTEST_SKIP() << "python3 has no Pillow (python3-pil): " << probe;
  TempDir t;
  loader_test::run_python(kMakeCases, {t.str()});
  const Case cases[] = {{"rgb", false}, {"rgb_odd", false}, {"rgba", false}, {"gray", false}, {"gray_alpha", false},
                        {"palette_trns", false}, {"bilevel", false}, {"gray_best_compression", false}, {"rgb16", false},
                        {"rgba16", false}, {"gray2", false}, {"gray4", false}, {"jpeg_q90", true}, {"jpeg_q75_444", true},
                        {"jpeg_smooth", true}, {"jpeg_gray", true}, {"jpeg_progressive_odd", true}};
  for (const Case& c : cases) {
    const std::string base = t / c.name;
    DecodedImage d;
    try {
      d = decode(loader_test::read_bytes(base + (c.jpeg ? ".jpg" : ".png")), c.jpeg);
    } catch (const dlb::InputError& e) {
      ADD_FAILURE() << c.name << ": " << e.what();
      continue;
    }
    const std::string want = loader_test::read_bytes(base + ".rgb");
    int w = 0, h = 0;
    ASSERT_EQ(std::sscanf(loader_test::read_bytes(base + ".size").c_str(), "%d %d", &w, &h), 2);
    ASSERT_EQ(d.w, w) << c.name;
    ASSERT_EQ(d.h, h) << c.name;
    ASSERT_EQ(d.rgb.size(), want.size()) << c.name;
    int worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int(d.rgb[i]) - int(static_cast<unsigned char>(want[i]))));
    if (c.jpeg) EXPECT_LE(worst, 1) << c.name << ": largest difference from Pillow";
    else EXPECT_EQ(worst, 0) << c.name << ": largest difference from Pillow";
    RecordProperty(c.name, worst);
  }
}

TEST(LoaderCodec, PillowReadsOurFiles) {
  if (loader_test::python().empty()) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir t;
  std::vector<std::uint8_t> rgb(29 * 31 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<std::uint8_t>((i * 37) ^ (i >> 3));
  loader_test::write_bytes(t / "ours.png", png_encode(rgb.data(), 29, 31));
  loader_test::write_bytes(t / "ours.jpg", jpeg_encode(rgb.data(), 29, 31, 90));
  const std::string out = loader_test::run_python(
      "import sys\nfrom PIL import Image\n"
      "for f in sys.argv[1:]:\n  im=Image.open(f); open(f+'.rgb','wb').write(im.convert('RGB').tobytes()); print(im.format, im.size)\n",
      {t / "ours.png", t / "ours.jpg"});
  EXPECT_EQ(out, "PNG (29, 31)\nJPEG (29, 31)\n");
  EXPECT_EQ(loader_test::read_bytes(t / "ours.png.rgb"), std::string(rgb.begin(), rgb.end()));
  const DecodedImage d = decode(loader_test::read_bytes(t / "ours.jpg"), true);
  const std::string pil = loader_test::read_bytes(t / "ours.jpg.rgb");
  int worst = 0;
  for (std::size_t i = 0; i < pil.size(); ++i) worst = std::max(worst, std::abs(int(d.rgb[i]) - int(static_cast<unsigned char>(pil[i]))));
  EXPECT_LE(worst, 1);
}

TEST(LoaderCodec, RefusesWhatItCannotMatch) {
  auto reason = [](const std::string& bytes, bool jpeg) {
    try {
      decode(bytes, jpeg);
    } catch (const dlb::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(decoded)");
  };
  EXPECT_NE(reason("not a png at all", false).find("no PNG signature"), std::string::npos);
  EXPECT_NE(reason("\xFF\xD8\xFF\xE0", true).find("corrupt JPEG"), std::string::npos);
  std::vector<std::uint8_t> px(8 * 8 * 3, 100);
  const std::string png = png_encode(px.data(), 8, 8), jpg = jpeg_encode(px.data(), 8, 8, 90);
  EXPECT_NE(reason(png.substr(0, png.size() - 20), false).find("truncated"), std::string::npos);
  EXPECT_NE(reason(jpg.substr(0, jpg.size() / 2), true).find("corrupt JPEG"), std::string::npos);
  DecodedImage d;
  try {
    png_decode(reinterpret_cast<const std::uint8_t*>(png.data()), png.size(), &d, 32, 32);
    ADD_FAILURE() << "an 8x8 image passed as 32x32";
  } catch (const dlb::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("image is 8x8, the dataset's images are 32x32"), std::string::npos);
  }
}
