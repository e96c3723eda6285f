// Element conversions and buffers of the DAE executor (values.h).
#include "values.h"

#include <limits>

namespace ember_emu {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000 | (man << 13));  // inf / nan
  if (exp == 0) {
    if (man == 0) return BitsFloat(sign);
    float f = std::ldexp((float)man, -24);  // subnormal: exact
    return sign ? -f : f;
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (man << 13));
}

namespace {
// Round a finite non-negative double to half bits (RNE), sign applied by the caller.
uint16_t RoundHalfMagnitude(double a) {
  if (a >= 65520.0) return 0x7C00;  // rounds to inf
  if (a < std::ldexp(1.0, -14)) {   // subnormal range: units of 2^-24
    double q = std::nearbyint(a * 16777216.0);  // default rounding mode: to nearest even
    return (uint16_t)q;
  }
  int e;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 11 significant bits: scale m to [1024, 2048)
  double q = std::nearbyint(std::ldexp(m, 11));
  if (q == 2048.0) q = 1024.0, ++e;
  int exp = e - 1 + 15;
  if (exp >= 31) return 0x7C00;
  return (uint16_t)((exp << 10) | ((int)q - 1024));
}
}  // namespace

uint16_t DoubleToHalf(double d) {
  if (std::isnan(d)) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return (uint16_t)(((u >> 48) & 0x8000) | 0x7E00 | ((u >> 42) & 0x1FF));
  }
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::fabs(d);
  if (std::isinf(a)) return sign | 0x7C00;
  return sign | RoundHalfMagnitude(a);
}
uint16_t FloatToHalf(float f) {
  if (std::isnan(f)) {
    const uint32_t u = FloatBits(f);
    return (uint16_t)(((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF));
  }
  return DoubleToHalf((double)f);  // exact widening, then one rounding
}
uint16_t FloatToBF16(float f) {
  const uint32_t u = FloatBits(f);
  if (std::isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  const uint32_t lsb = (u >> 16) & 1;
  return (uint16_t)((u + 0x7FFF + lsb) >> 16);
}

BufferRef NewBuffer(DType d, std::vector<int64_t> shape) {
  auto b = std::make_shared<Buffer>();
  b->dtype = d;
  b->shape = std::move(shape);
  int64_t n = b->nbytes();
  if (n < 0) throw RunError("negative buffer size");
  b->own.assign((size_t)std::max<int64_t>(n, 1), 0);
  b->data = b->own.data();
  return b;
}

BufferRef ShapeOnlyBuffer(DType d, std::vector<int64_t> shape) {
  auto b = std::make_shared<Buffer>();
  b->dtype = d;
  b->shape = std::move(shape);
  if (b->nbytes() < 0) throw RunError("negative buffer size");
  return b;
}

}  // namespace ember_emu
