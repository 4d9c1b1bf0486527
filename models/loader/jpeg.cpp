// JPEG through libjpeg-turbo's libjpeg API (see codec.h). libjpeg reports errors by error_exit, which
// here longjmps back into the function holding the setjmp (no C++ object of its own lives across it);
// its warnings (corrupt data, a premature end that libjpeg pads over) are errors too: Pillow refuses
// a truncated file unless told otherwise.
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "models/loader/codec.h"

namespace dlb::models::loader {

namespace {

struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64] = {0};
};

void on_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

void on_message(j_common_ptr c, int level) {
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  if (level < 0 && e->message[0] == 0) (*c->err->format_message)(c, e->message);  // the first warning
}

bool decode(jpeg_decompress_struct* c, JpegErr* err, const std::uint8_t* p, std::size_t n, DecodedImage* out,
            int want_w, int want_h) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(c);
  jpeg_mem_src(c, p, static_cast<unsigned long>(n));
  jpeg_read_header(c, TRUE);
  const std::uint64_t w = c->image_width, h = c->image_height;
  if (w * h > kMaxImagePixels) {
    std::snprintf(err->message, sizeof err->message, "%llux%llu pixels, over the %llu a dataset image may have",
                  static_cast<unsigned long long>(w), static_cast<unsigned long long>(h),
                  static_cast<unsigned long long>(kMaxImagePixels));
    return false;
  }
  if ((want_w && int(w) != want_w) || (want_h && int(h) != want_h)) {
    std::snprintf(err->message, sizeof err->message, "image is %llux%llu, the dataset's images are %dx%d (no resize transform)",
                  static_cast<unsigned long long>(w), static_cast<unsigned long long>(h), want_w, want_h);
    return false;
  }
  if (c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK) {
    std::snprintf(err->message, sizeof err->message, "CMYK JPEG (not supported)");
    return false;
  }
  c->out_color_space = JCS_RGB;
  if (err->message[0]) return false;  // a warning while reading the header
  jpeg_start_decompress(c);
  if (c->output_components != 3) {
    std::snprintf(err->message, sizeof err->message, "decodes to %d components, not RGB", c->output_components);
    return false;
  }
  out->w = int(w), out->h = int(h);
  out->rgb.resize(w * h * 3);
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = out->rgb.data() + std::size_t(c->output_scanline) * w * 3;
    jpeg_read_scanlines(c, &row, 1);
    if (err->message[0]) return false;
  }
  jpeg_finish_decompress(c);
  return err->message[0] == 0;
}

bool encode(jpeg_compress_struct* c, JpegErr* err, const std::uint8_t* rgb, int w, int h, int quality,
            unsigned char** buf, unsigned long* size) {
  if (setjmp(err->jump)) return false;
  jpeg_create_compress(c);
  jpeg_mem_dest(c, buf, size);
  c->image_width = static_cast<JDIMENSION>(w);
  c->image_height = static_cast<JDIMENSION>(h);
  c->input_components = 3;
  c->in_color_space = JCS_RGB;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  jpeg_start_compress(c, TRUE);
  while (c->next_scanline < c->image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb + std::size_t(c->next_scanline) * w * 3);
    jpeg_write_scanlines(c, &row, 1);
  }
  jpeg_finish_compress(c);
  return true;
}

}  // namespace

void jpeg_decode(const std::uint8_t* p, std::size_t n, DecodedImage* out, int want_w, int want_h) {
  if (n < 3 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF) throw InputError("not a JPEG file (no SOI marker)");
  jpeg_decompress_struct c{};
  JpegErr err;
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error_exit;
  err.mgr.emit_message = on_message;
  const bool ok = decode(&c, &err, p, n, out, want_w, want_h);
  jpeg_destroy_decompress(&c);
  if (!ok) throw InputError(std::string("corrupt JPEG: ") + err.message);
}

std::string jpeg_encode(const std::uint8_t* rgb, int w, int h, int quality) {
  jpeg_compress_struct c{};
  JpegErr err;
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_error_exit;
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const bool ok = encode(&c, &err, rgb, w, h, quality, &buf, &size);
  jpeg_destroy_compress(&c);
  std::string out;
  if (ok) out.assign(reinterpret_cast<const char*>(buf), size);
  std::free(buf);
  if (!ok) throw std::runtime_error(std::string("libjpeg cannot write the image: ") + err.message);
  return out;
}

}  // namespace dlb::models::loader
