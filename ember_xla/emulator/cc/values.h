// Element types of the DAE executor: f16 / bf16 bit conversions (round to nearest even, as
// numpy and ml_dtypes do), numpy's arithmetic rounding per dtype, integer wrap-around, and
// buffers (an argument, an alloc, a row buffer) with their emulated base addresses.
#ifndef EMBER_XLA_EMULATOR_NATIVE_VALUES_H_
#define EMBER_XLA_EMULATOR_NATIVE_VALUES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "program.h"

namespace ember_emu {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half <-> float/double, round to nearest even (numpy's npy_float_to_half /
// npy_double_to_half).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
uint16_t DoubleToHalf(double d);
inline float BF16ToFloat(uint16_t b) { return BitsFloat((uint32_t)b << 16); }
uint16_t FloatToBF16(float f);

// A value rounded to float dtype d (from double; f16 directly from double as numpy's astype,
// bf16 through float as ml_dtypes).
inline double RoundTo(double x, DType d);
// The result of a float op computed in dtype d from exact operands: numpy computes f16/bf16
// ops in float32 and rounds the float32 result.
inline double Finish(double x_float_or_double, DType d) { return RoundTo(x_float_or_double, d); }
// index and i64 are the same numpy dtype (int64)
inline bool SameNumpyType(DType a, DType b) {
  auto n = [](DType d) { return d == DType::Index ? DType::I64 : d; };
  return n(a) == n(b);
}
// Two's complement wrap to integer dtype d (i1: nonzero, like numpy's bool).
inline int64_t Wrap(int64_t x, DType d);

struct Buffer {
  DType dtype;
  std::vector<int64_t> shape;
  uint8_t* data = nullptr;
  std::vector<uint8_t> own;
  int64_t base = -1;     // emulated address; -1: none (a row buffer)
  bool readonly = false;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t nbytes() const { return numel() * ItemSize(dtype); }
  // element k (flat) as a double (floats) or an int64 (ints), by dtype
  double GetF(int64_t k) const;
  int64_t GetI(int64_t k) const;
  void SetF(int64_t k, double v);  // v already representable in dtype
  void SetI(int64_t k, int64_t v);
};
using BufferRef = std::shared_ptr<Buffer>;

BufferRef NewBuffer(DType d, std::vector<int64_t> shape);
// A buffer with a shape and no data (addresses mode: contents never computed).
BufferRef ShapeOnlyBuffer(DType d, std::vector<int64_t> shape);

inline double RoundTo(double x, DType d) {
  switch (d) {
    case DType::F64: return x;
    case DType::F32: return (double)(float)x;
    case DType::F16: return (double)HalfToFloat(DoubleToHalf(x));
    case DType::BF16: return (double)BF16ToFloat(FloatToBF16((float)x));
    default: return x;
  }
}

inline int64_t Wrap(int64_t x, DType d) {
  switch (d) {
    case DType::I32: return (int32_t)(uint32_t)(uint64_t)x;
    case DType::I16: return (int16_t)(uint16_t)(uint64_t)x;
    case DType::I8: return (int8_t)(uint8_t)(uint64_t)x;
    case DType::I1: return x != 0;  // numpy bool: nonzero
    default: return x;
  }
}

inline double Buffer::GetF(int64_t k) const {
  const uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return HalfToFloat(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return BF16ToFloat(v); }
    default: return (double)GetI(k);
  }
}
inline int64_t Buffer::GetI(int64_t k) const {
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
inline void Buffer::SetF(int64_t k, double v) {
  uint8_t* p = data + k * ItemSize(dtype);
  switch (dtype) {
    case DType::F64: std::memcpy(p, &v, 8); return;
    case DType::F32: { float f = (float)v; std::memcpy(p, &f, 4); return; }
    case DType::F16: { uint16_t h = DoubleToHalf(v); std::memcpy(p, &h, 2); return; }
    case DType::BF16: { uint16_t b = FloatToBF16((float)v); std::memcpy(p, &b, 2); return; }
    default: SetI(k, (int64_t)v); return;
  }
}
inline void Buffer::SetI(int64_t k, int64_t v) {
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

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_VALUES_H_
