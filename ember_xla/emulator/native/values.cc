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

double RoundTo(double x, DType d) {
  switch (d) {
    case DType::F64: return x;
    case DType::F32: return (double)(float)x;
    case DType::F16: return (double)HalfToFloat(DoubleToHalf(x));
    case DType::BF16: return (double)BF16ToFloat(FloatToBF16((float)x));
    default: return x;
  }
}

int64_t Wrap(int64_t x, DType d) {
  switch (d) {
    case DType::I32: return (int32_t)(uint32_t)(uint64_t)x;
    case DType::I16: return (int16_t)(uint16_t)(uint64_t)x;
    case DType::I8: return (int8_t)(uint8_t)(uint64_t)x;
    case DType::I1: return x != 0;  // numpy bool: nonzero
    default: return x;
  }
}

double Buffer::GetF(int64_t k) const {
  const uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return HalfToFloat(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return BF16ToFloat(v); }
    default: return (double)GetI(k);
  }
}
int64_t Buffer::GetI(int64_t k) const {
  const uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::I64: case DType::Index: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::I8: return (int8_t)*p;
    case DType::I1: return *p ? 1 : 0;
    default: return (int64_t)GetF(k);
  }
}
void Buffer::SetF(int64_t k, double v) {
  uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::F64: std::memcpy(p, &v, 8); return;
    case DType::F32: { float f = (float)v; std::memcpy(p, &f, 4); return; }
    case DType::F16: { uint16_t h = DoubleToHalf(v); std::memcpy(p, &h, 2); return; }
    case DType::BF16: { uint16_t b = FloatToBF16((float)v); std::memcpy(p, &b, 2); return; }
    default: SetI(k, (int64_t)v); return;
  }
}
void Buffer::SetI(int64_t k, int64_t v) {
  uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::I64: case DType::Index: std::memcpy(p, &v, 8); return;
    case DType::I32: { int32_t x = (int32_t)v; std::memcpy(p, &x, 4); return; }
    case DType::I16: { int16_t x = (int16_t)v; std::memcpy(p, &x, 2); return; }
    case DType::I8: *p = (uint8_t)v; return;
    case DType::I1: *p = v ? 1 : 0; return;
    default: SetF(k, (double)v); return;
  }
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

}  // namespace ember_emu
