// XLA:CPU's f32 rsqrt, reproduced: the hardware estimate (rsqrtss) refined by one
// Newton-Raphson step whose multiply-adds XLA's LLVM contracts into FMAs, the estimate kept
// for x < FLT_MIN and x == inf (xla/codegen/intrinsic/rsqrt.cc, the path XLA takes on AMD
// CPUs with AVX). The estimate instruction differs between CPU vendors, so callers must check
// that this matches XLA on the running machine (EmberRsqrtProbe) before relying on it.
#ifndef EMBER_XLA_NATIVE_XLA_RSQRT_H_
#define EMBER_XLA_NATIVE_XLA_RSQRT_H_

#include <cfloat>
#include <cmath>

#include <immintrin.h>

namespace ember {

__attribute__((target("sse,fma"))) inline float XlaRsqrt(float x) {
  const float guess = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
  if (x < FLT_MIN || x == INFINITY) return guess;
  const float r2 = x * guess;
  const float half_r = guess * -0.5f;
  const float h = __builtin_fmaf(r2, guess, -1.0f);
  return __builtin_fmaf(half_r, h, guess);
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_XLA_RSQRT_H_
