// Element types, rounding and the XLA-exact scalar combiners shared by all ember kernels.
//
// Every arithmetic step is done in float and rounded to the table's type right away (round to
// nearest even), which is what XLA:CPU does for bf16/f16: it computes each add/multiply in f32
// and converts back. Never build this with -ffast-math or FP contraction (FMA would change bits).
#ifndef EMBER_XLA_NATIVE_COMMON_H_
#define EMBER_XLA_NATIVE_COMMON_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ember {

struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };
// An f32 table read as bf16: each value rounded to bf16 as it is loaded, which is what XLA:CPU
// computes for a gather of the converted table (``convert(table, bf16)`` fused into the gather:
// flax ``nn.Embed(dtype=bfloat16)`` over f32 parameters). The rows are summed as a bf16
// table's.
struct f32_as_bf16 { float v; };

inline uint32_t FloatBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float BitsFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// bf16 <-> float, round to nearest even; NaN stays NaN (quieted, sign kept).
inline uint16_t FloatToBf16Bits(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float Bf16BitsToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// f16 <-> float, round to nearest even (F. Giesen's float_to_half_fast3_rtne), NaN quieted.
inline uint16_t FloatToF16Bits(float f) {
  uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t o;
  if (x >= 0x7f800000u) {
    o = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
  } else if (x >= 0x477ff000u) {  // >= 65520 rounds to infinity
    o = 0x7c00u;
  } else if (x < 0x38800000u) {  // result is f16-subnormal or zero
    const float magic = 0.5f;     // its ulp is 2^-24, the f16 subnormal step
    o = FloatBits(BitsFloat(x) + magic) - FloatBits(magic);
  } else {
    const uint32_t odd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
    o = x >> 13;
  }
  return static_cast<uint16_t>(o | sign);
}
inline float F16BitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Elem<T>: load to float, store from float, and Round(x) == Load(Store(x)).
template <typename T> struct Elem;
template <> struct Elem<float> {
  static float Load(float v) { return v; }
  static float Store(float v) { return v; }
  static float Round(float v) { return v; }
};
template <> struct Elem<bf16> {
  static float Load(bf16 v) { return Bf16BitsToFloat(v.bits); }
  static bf16 Store(float v) { return bf16{FloatToBf16Bits(v)}; }
  static float Round(float v) { return Bf16BitsToFloat(FloatToBf16Bits(v)); }
};
template <> struct Elem<f32_as_bf16> {
  static float Load(f32_as_bf16 v) { return Bf16BitsToFloat(FloatToBf16Bits(v.v)); }
  static f32_as_bf16 Store(float v) { return f32_as_bf16{v}; }
  static float Round(float v) { return Bf16BitsToFloat(FloatToBf16Bits(v)); }
};
template <> struct Elem<f16> {
  static float Load(f16 v) { return F16BitsToFloat(v.bits); }
  static f16 Store(float v) { return f16{FloatToF16Bits(v)}; }
  static float Round(float v) { return F16BitsToFloat(FloatToF16Bits(v)); }
};

// XLA's max/min (IEEE 754-2019 maximum/minimum): NaN propagates, -0 < +0.
inline float XlaMax(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline float XlaMin(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

// Asks for the `bytes` bytes at p to be read soon, one 64-byte line at a time, into the cache
// levels `Locality` names (__builtin_prefetch's: 3 every level ... 0 non-temporal).
template <int Locality>
inline void PrefetchLines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, Locality);
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_COMMON_H_
