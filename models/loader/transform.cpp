// ToTensor + Normalize (+ crop/flip): the reference and the table-driven version (see transform.h).
#include "models/loader/transform.h"

#include "kernels/common/errors.h"

namespace dlb::models::loader {

namespace {

std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline float normalize(std::uint8_t x, float mean, float std) {
  const float v = static_cast<float>(x) / 255.0f;  // ToTensor
  return (v - mean) / std;                         // Normalize
}

}  // namespace

Augment parse_augment(const std::string& s) {
  if (s == "none") return Augment::none;
  if (s == "crop-flip") return Augment::crop_flip;
  throw UsageError("augment '" + s + "': expected none or crop-flip");
}

const char* augment_name(Augment a) { return a == Augment::none ? "none" : "crop-flip"; }

Draw draw_for(const TransformSpec& t, std::uint64_t seed, std::uint64_t epoch, std::uint64_t index) {
  Draw d;
  if (t.augment == Augment::none) return d;
  const std::uint64_t r = mix(mix(seed * 0x9E3779B97F4A7C15ull + epoch) + index * 0xD1B54A32D192ED03ull);
  const auto span = static_cast<std::uint64_t>(2 * t.pad + 1);
  d.oy = static_cast<int>((r & 0xFFFF) % span);
  d.ox = static_cast<int>(((r >> 16) & 0xFFFF) % span);
  d.flip = (r >> 32) & 1;
  return d;
}

void transform_reference(const SampleView& s, const TransformSpec& t, const Draw& d, float* out) {
  const int pad = t.augment == Augment::none ? 0 : t.pad;
  for (int c = 0; c < s.c; ++c)
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < s.w; ++x) {
        // crop: out(y, x) = padded(y + oy, x + ox); flip first mirrors x within the crop
        const int xc = d.flip ? s.w - 1 - x : x;
        const int sy = y + d.oy - pad, sx = xc + d.ox - pad;
        const bool inside = sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
        const std::uint8_t v = inside ? s.p[c * s.sc + sy * s.sy + sx * s.sx] : 0;  // zero fill
        out[(std::size_t(c) * s.h + y) * s.w + x] = normalize(v, t.mean[c], t.std[c]);
      }
}

Transform::Transform(const TransformSpec& t) : t_(t) {
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table_[c][v] = normalize(static_cast<std::uint8_t>(v), t.mean[c], t.std[c]);
}

void Transform::operator()(const SampleView& s, const Draw& d, float* out) const {
  const int pad = t_.augment == Augment::none ? 0 : t_.pad;
  for (int c = 0; c < s.c; ++c) {
    const float* table = table_[c < 3 ? c : 2];
    const std::uint8_t* plane = s.p + c * s.sc;
    float* o = out + std::size_t(c) * s.h * s.w;
    for (int y = 0; y < s.h; ++y, o += s.w) {
      const int sy = y + d.oy - pad;
      if (sy < 0 || sy >= s.h) {
        for (int x = 0; x < s.w; ++x) o[x] = table[0];
        continue;
      }
      const std::uint8_t* row = plane + sy * s.sy;
      // x reads sx = (flip ? w-1-x : x) + ox - pad; the columns outside [0, w) are the zero fill
      const int shift = d.ox - pad;
      if (!d.flip) {
        for (int x = 0; x < s.w; ++x) {
          const int sx = x + shift;
          o[x] = sx >= 0 && sx < s.w ? table[row[sx * s.sx]] : table[0];
        }
      } else {
        for (int x = 0; x < s.w; ++x) {
          const int sx = s.w - 1 - x + shift;
          o[x] = sx >= 0 && sx < s.w ? table[row[sx * s.sx]] : table[0];
        }
      }
    }
  }
}

}  // namespace dlb::models::loader
