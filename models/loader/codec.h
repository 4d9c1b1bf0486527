// Image files of a folder dataset: PNG through libpng, JPEG through libjpeg-turbo, decoded to 8-bit
// RGB rows (HWC) the way Pillow's Image.open(f).convert("RGB") gives them, which is what torchvision's
// ImageFolder loader reads: palette, gray and 1/2/4-bit pixels expanded, alpha dropped (not
// composited), 16-bit samples cut to their high byte, no gamma applied; JPEG with libjpeg's defaults
// (islow IDCT, fancy upsampling), grayscale replicated. And the encoders `dlbench data make` writes with.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models::loader {

// Largest image a dataset may hold (a decompression bomb is refused before its pixels are allocated).
inline constexpr std::uint64_t kMaxImagePixels = std::uint64_t(1) << 26;

struct DecodedImage {
  int w = 0, h = 0;
  std::vector<std::uint8_t> rgb;  // h * w * 3, rows top to bottom
};

// Decode the file's bytes into *out (its buffer reused). When want_w/want_h are nonzero, an image of
// another size is refused after the header, before any pixel. Problems throw dlb::InputError with the
// reason alone (the caller names the file and sample).
void png_decode(const std::uint8_t* p, std::size_t n, DecodedImage* out, int want_w = 0, int want_h = 0);
void jpeg_decode(const std::uint8_t* p, std::size_t n, DecodedImage* out, int want_w = 0, int want_h = 0);

// 8-bit RGB rows to a file's bytes: PNG (zlib level 6, libpng's default filters), JPEG (quality
// 1..100, 4:2:0 chroma, libjpeg's defaults). std::runtime_error when the library refuses.
std::string png_encode(const std::uint8_t* rgb, int w, int h);
std::string jpeg_encode(const std::uint8_t* rgb, int w, int h, int quality);

}  // namespace dlb::models::loader
