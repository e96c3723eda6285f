// Internal to machine_ops.cc: the element arithmetic of the DAE executor's instructions:
// numpy's type promotion, float ops computed in double and rounded to the dtype, wrapped
// integer ops, XLA's NaN max/min, compares, and reading/writing one lane of a value.
#ifndef EMBER_XLA_EMULATOR_CC_MACHINE_ARITH_H_
#define EMBER_XLA_EMULATOR_CC_MACHINE_ARITH_H_

#include <algorithm>
#include <cmath>
#include <limits>

#include "machine.h"

namespace ember_emu {
namespace {

// numpy's result type of a float op on a and b (f16 with bf16 or any with f32 -> f32).
DType Promote(DType a, DType b) {
  if (!IsFloat(a) && !IsFloat(b)) return DType::F64;
  if (!IsFloat(a)) return b;
  if (!IsFloat(b)) return a;
  if (a == b) return a;
  if (a == DType::F64 || b == DType::F64) return DType::F64;
  return DType::F32;
}

double FloatOp(Op op, double a, double b, DType ct) {
  if (op == Op::MaxF) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a > b) return a;
    if (a == b) return std::signbit(a) ? b : a;
    return b;
  }
  if (op == Op::MinF) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a < b) return a;
    if (a == b) return std::signbit(a) ? a : b;
    return b;
  }
  if (ct == DType::F64) {
    switch (op) {
      case Op::AddF: return a + b;
      case Op::SubF: return a - b;
      case Op::MulF: return a * b;
      default: return a / b;
    }
  }
  const float x = (float)a, y = (float)b;
  float r;
  switch (op) {
    case Op::AddF: r = x + y; break;
    case Op::SubF: r = x - y; break;
    case Op::MulF: r = x * y; break;
    default: r = x / y; break;
  }
  return RoundTo((double)r, ct);
}

int64_t IntOp(Op op, int64_t a, int64_t b) {
  const uint64_t x = (uint64_t)a, y = (uint64_t)b;
  switch (op) {
    case Op::AddI: return (int64_t)(x + y);
    case Op::SubI: return (int64_t)(x - y);
    case Op::MulI: return (int64_t)(x * y);
    case Op::MaxSI: return std::max(a, b);
    case Op::MinSI: return std::min(a, b);
    case Op::AndI: return a & b;
    case Op::OrI: return a | b;
    default: return a ^ b;
  }
}

bool Compare(int pred, double a, double b) {
  const bool un = std::isnan(a) || std::isnan(b);
  switch (pred) {
    case 0: case 6: return a == b;
    case 1: return a != b;
    case 2: case 7: return a < b;
    case 3: case 8: return a <= b;
    case 4: case 9: return a > b;
    case 5: case 10: return a >= b;
    case 11: return a != b && !un;
    case 12: return a != b;
    case 13: return !un;
    default: return un;
  }
}
bool CompareI(int pred, int64_t a, int64_t b) {
  switch (pred) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
  }
}

// Lane k of v, broadcasting a scalar (a vector with too few lanes is an error, as in numpy).
inline int64_t Lane(const Value& v, int64_t k) {
  if (v.lanes == -1) throw RunError("a buffer used as a scalar or vector operand");
  if (v.lanes > 0 && k >= v.lanes)
    throw RunError("vector operand of " + std::to_string(v.lanes) + " lanes, " +
                   std::to_string(k + 1) + " needed");
  return v.lanes > 0 ? k : 0;
}
inline double LF(const Value& v, int64_t k) { return v.F(Lane(v, k)); }
inline int64_t LI(const Value& v, int64_t k) { return v.I(Lane(v, k)); }

}  // namespace

// Sets lane k of out (of dtype out.dt) from a double (float dtypes) via astype rounding.
static inline void PutF(Value& out, int64_t k, double x) {
  if (IsFloat(out.dt)) out.f[k] = RoundTo(x, out.dt);
  else out.i[k] = out.dt == DType::I1 ? (x != 0.0) : Wrap((int64_t)x, out.dt);
}
static inline void PutI(Value& out, int64_t k, int64_t x, bool /*vector*/) {
  if (IsFloat(out.dt)) out.f[k] = RoundTo((double)x, out.dt);
  else if (out.dt == DType::I1) out.i[k] = x != 0;  // numpy bool: nonzero
  else out.i[k] = Wrap(x, out.dt);
}

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_CC_MACHINE_ARITH_H_
