// PNG through libpng's classic API (see codec.h for the conversions and why). libpng reports errors
// by longjmp: the functions holding a setjmp keep no C++ object of their own between the jump point
// and the library calls, so nothing is skipped when it jumps; buffers belong to the callers.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "models/loader/codec.h"

namespace dlb::models::loader {

namespace {

struct PngIo {
  const std::uint8_t* p = nullptr;
  std::size_t n = 0, at = 0;
  std::string* grow = nullptr;  // encoder output
  char message[200] = {0};
  bool bad_data = false;  // a warning about the image data itself (see on_warning)
};

void on_error(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->message, sizeof io->message, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}
// libpng's warnings are mostly benign chunk complaints (an iCCP profile, a bad tEXt) that Pillow
// ignores too; those about the image data (too little, too much, a damaged zlib stream) mean pixels
// Pillow would refuse as a truncated or broken file: kept, and the decode fails.
void on_warning(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  if (io->bad_data || !msg) return;
  const std::string m = msg;
  if (m.find("image data") != std::string::npos || m.find("compressed data") != std::string::npos ||
      m.find("IDAT") != std::string::npos || m.find("CRC") != std::string::npos) {
    io->bad_data = true;
    std::snprintf(io->message, sizeof io->message, "%s", msg);
  }
}

void read_bytes(png_structp png, png_bytep out, png_size_t len) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (len > io->n - io->at) png_error(png, "truncated (the file ends inside the image data)");
  std::memcpy(out, io->p + io->at, len);
  io->at += len;
}

void write_bytes(png_structp png, png_bytep data, png_size_t len) {
  static_cast<PngIo*>(png_get_io_ptr(png))->grow->append(reinterpret_cast<const char*>(data), len);
}
void flush_nothing(png_structp) {}

// The header read and checked; the transformations to 8-bit RGB set. false when it jumped.
bool read_header(png_structp png, png_infop info, PngIo* io, int want_w, int want_h, std::uint32_t* w, std::uint32_t* h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, io, read_bytes);
  png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);  // as Pillow: any bad CRC is
  png_set_user_limits(png, 1u << 16, 1u << 16);
  png_read_info(png, info);
  int depth = 0, color = 0;
  png_get_IHDR(png, info, w, h, &depth, &color, nullptr, nullptr, nullptr);
  if (std::uint64_t(*w) * *h > kMaxImagePixels) {
    std::snprintf(io->message, sizeof io->message, "%ux%u pixels, over the %llu a dataset image may have", *w, *h,
                  static_cast<unsigned long long>(kMaxImagePixels));
    return false;
  }
  if ((want_w && int(*w) != want_w) || (want_h && int(*h) != want_h)) {
    std::snprintf(io->message, sizeof io->message, "image is %ux%u, the dataset's images are %dx%d (no resize transform)",
                  *w, *h, want_w, want_h);
    return false;
  }
  if (color == PNG_COLOR_TYPE_GRAY && depth == 16) {
    // Pillow reads it as mode I;16 and convert("RGB") clips it at 255: not the high byte.
    std::snprintf(io->message, sizeof io->message, "16-bit grayscale PNG (not supported: Pillow clips it, it does not scale it)");
    return false;
  }
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);  // Pillow's P -> RGB ignores tRNS
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  if (depth == 16) png_set_strip_16(png);  // the high byte, as Pillow's RGB;16B
  // palette_to_rgb also turns a tRNS chunk into alpha: dropped with the rest
  if ((color & PNG_COLOR_MASK_ALPHA) || (color == PNG_COLOR_TYPE_PALETTE && png_get_valid(png, info, PNG_INFO_tRNS)))
    png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != std::size_t(*w) * 3) {
    std::snprintf(io->message, sizeof io->message, "unexpected row layout after conversion to RGB");
    return false;
  }
  return true;
}

bool read_pixels(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

bool write_png(png_structp png, png_infop info, PngIo* io, png_bytepp rows, int w, int h) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, io, write_bytes, flush_nothing);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

void png_decode(const std::uint8_t* p, std::size_t n, DecodedImage* out, int want_w, int want_h) {
  if (n < 8 || png_sig_cmp(p, 0, 8) != 0) throw InputError("not a PNG file (no PNG signature)");
  PngIo io;
  io.p = p, io.n = n;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (!png) throw OutOfMemory("libpng read struct");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw OutOfMemory("libpng info struct");
  }
  std::uint32_t w = 0, h = 0;
  bool ok = read_header(png, info, &io, want_w, want_h, &w, &h);
  std::vector<png_bytep> rows;
  if (ok) {
    out->w = int(w), out->h = int(h);
    out->rgb.resize(std::size_t(w) * h * 3);
    rows.resize(h);
    for (std::uint32_t y = 0; y < h; ++y) rows[y] = out->rgb.data() + std::size_t(y) * w * 3;
    ok = read_pixels(png, rows.data());
  }
  png_destroy_read_struct(&png, &info, nullptr);
  if (ok && io.bad_data) ok = false;
  if (!ok) throw InputError(std::string("corrupt PNG: ") + io.message);
}

std::string png_encode(const std::uint8_t* rgb, int w, int h) {
  std::string out;
  PngIo io;
  io.grow = &out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (!png) throw std::runtime_error("libpng: cannot create a write struct");
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows(h);
  for (int y = 0; y < h; ++y) rows[y] = const_cast<png_bytep>(rgb + std::size_t(y) * w * 3);
  const bool ok = info && write_png(png, info, &io, rows.data(), w, h);
  png_destroy_write_struct(&png, &info);
  if (!ok) throw std::runtime_error(std::string("libpng cannot write the image: ") + io.message);
  return out;
}

}  // namespace dlb::models::loader
