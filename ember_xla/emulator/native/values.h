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
double RoundTo(double x, DType d);
// The result of a float op computed in dtype d from exact operands: numpy computes f16/bf16
// ops in float32 and rounds the float32 result.
inline double Finish(double x_float_or_double, DType d) { return RoundTo(x_float_or_double, d); }
// index and i64 are the same numpy dtype (int64)
inline bool SameNumpyType(DType a, DType b) {
  auto n = [](DType d) { return d == DType::Index ? DType::I64 : d; };
  return n(a) == n(b);
}
// Two's complement wrap to integer dtype d (i1: nonzero, like numpy's bool).
int64_t Wrap(int64_t x, DType d);

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

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_VALUES_H_
