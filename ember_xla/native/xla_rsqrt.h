// XLA:CPU's f32 rsqrt, reproduced: the hardware estimate (rsqrtss / vrsqrtps) refined by
// Newton-Raphson steps whose multiply-adds XLA's LLVM contracts into FMAs, the estimate kept
// for x < FLT_MIN and x == inf (xla/codegen/intrinsic/rsqrt.cc for vectors of up to 8 lanes:
// one step on AMD CPUs, whose estimate is the more accurate, two on the others). The estimate
// instruction differs between CPU vendors and models, so callers must check that this
// matches XLA on the running machine (EmberRsqrtProbe) before relying on it.
#ifndef EMBER_XLA_NATIVE_XLA_RSQRT_H_
#define EMBER_XLA_NATIVE_XLA_RSQRT_H_

#include <cfloat>
#include <cmath>

#include <immintrin.h>

namespace ember {

// XLA's Newton-Raphson steps after the estimate: 1 on AMD CPUs, 2 elsewhere.
inline const int kXlaRsqrtSteps = __builtin_cpu_is("amd") ? 1 : 2;

__attribute__((target("sse,fma"))) inline float XlaRsqrt(float x) {
  const float guess = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
  if (x < FLT_MIN || x == INFINITY) return guess;
  float r = guess;
  for (int step = 0; step < kXlaRsqrtSteps; ++step) {
    const float r2 = x * r;
    const float half_r = r * -0.5f;
    const float h = __builtin_fmaf(r2, r, -1.0f);
    r = __builtin_fmaf(half_r, h, r);
  }
  return r;
}

// Eight at a time (vrsqrtps gives each lane the bits rsqrtss gives it).
__attribute__((target("avx2,fma"))) inline __m256 XlaRsqrt8(__m256 x) {
  const __m256 guess = _mm256_rsqrt_ps(x);
  __m256 refined = guess;
  for (int step = 0; step < kXlaRsqrtSteps; ++step) {
    const __m256 r2 = _mm256_mul_ps(x, refined);
    const __m256 half_r = _mm256_mul_ps(refined, _mm256_set1_ps(-0.5f));
    const __m256 h = _mm256_fmadd_ps(r2, refined, _mm256_set1_ps(-1.0f));
    refined = _mm256_fmadd_ps(half_r, h, refined);
  }
  const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ),
                                   _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
  return _mm256_blendv_ps(refined, guess, keep);
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_XLA_RSQRT_H_
