// Padded sum/mean bags in YNNPACK's blocked order (blocked_sum.h): blocks of 4 rows, groups of
// 4 blocks, groups of 16 groups, then in order; every partial sum starts from zero. Weighted f16
// bags add their products, each rounded to f16 first, in the same order.
#include "blocked_sum.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "pool.h"
#include "reduce_parts.h"

namespace ember {
namespace {

template <typename T>
void Bags(const T* __restrict table, const T* __restrict weights, const Plan& plan, int64_t b0,
          int64_t b1, int64_t width, int64_t d, bool mean, float* __restrict out) {
  std::vector<float> acc(static_cast<size_t>(4 * d));
  float* blk = acc.data();
  float* g16 = blk + d;
  float* g256 = g16 + d;
  float* top = g256 + d;
  const float nan = std::nanf("");
  const float scale = 1.0f / static_cast<float>(width);
  for (int64_t b = b0; b < b1; ++b) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t* src = plan.src.data() + b * width;
    for (int64_t p = 0; p < width; ++p) {
      const int64_t row = src[p];
      if (row < 0) {
        for (int64_t c = 0; c < d; ++c) blk[c] = blk[c] + nan;
      } else if (weights != nullptr) {
        // XLA:CPU's loop fusion materializes the f16 products (YNNPACK has no f16 multiply),
        // converted to f32 for YNNPACK's reduce
        const T* r = table + row * d;
        const float w = Elem<T>::Load(weights[b * width + p]);
        for (int64_t c = 0; c < d; ++c)
          blk[c] = blk[c] + Elem<T>::Round(Elem<T>::Load(r[c]) * w);
      } else {
        const T* r = table + row * d;
        for (int64_t c = 0; c < d; ++c) blk[c] = blk[c] + Elem<T>::Load(r[c]);
      }
      const bool last = p + 1 == width;
      if ((p & 3) == 3 || last) {
        for (int64_t c = 0; c < d; ++c) g16[c] = g16[c] + blk[c], blk[c] = 0.0f;
        if (((p >> 2) & 3) == 3 || last) {
          for (int64_t c = 0; c < d; ++c) g256[c] = g256[c] + g16[c], g16[c] = 0.0f;
          if (((p >> 4) & 15) == 15 || last) {
            for (int64_t c = 0; c < d; ++c) top[c] = top[c] + g256[c], g256[c] = 0.0f;
          }
        }
      }
    }
    float* o = out + b * d;
    if (mean) {
      for (int64_t c = 0; c < d; ++c) o[c] = top[c] * scale;
    } else {
      for (int64_t c = 0; c < d; ++c) o[c] = top[c];
    }
  }
}

template <typename T>
void Run(const ffi::AnyBuffer& table, const void* weights, const Plan& plan, int64_t bags,
         int64_t width, const Options& opt, ffi::AnyBuffer& out) {
  const T* t = static_cast<const T*>(table.untyped_data());
  const T* w = static_cast<const T*>(weights);
  const int64_t d = table.dimensions()[1];
  float* o = static_cast<float*>(out.untyped_data());
  const bool mean = opt.combiner == Combiner::kMean;
  const int64_t work = bags * (width + 1) * d;
  const int64_t threads = work < kParallelWork ? 1 : PoolThreads();
  const int64_t parts = std::min<int64_t>(bags, threads * kPartsPerThread);
  if (parts <= 1) {
    Bags<T>(t, w, plan, 0, bags, width, d, mean, o);
    return;
  }
  PoolRun(parts, [&](int64_t part) {
    const int64_t b0 = bags * part / parts, b1 = bags * (part + 1) / parts;
    Bags<T>(t, w, plan, b0, b1, width, d, mean, o);
  });
}

}  // namespace

ffi::Error RunBlockedPaddedSum(const ffi::AnyBuffer& table, const void* weights,
                               ffi::DataType weights_type, const Plan& plan, int64_t bags,
                               int64_t width, const Options& opt, ffi::AnyBuffer& out) {
  if (out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("ember.padded_bag: the blocked order needs an f32 result");
  if ((opt.combiner != Combiner::kSum && opt.combiner != Combiner::kMean) || opt.init != 0.0)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the blocked order is for sum/mean bags starting at 0");
  if (opt.weighted && (table.element_type() != ffi::DataType::F16 ||
                       weights_type != ffi::DataType::F16 || opt.combiner != Combiner::kSum))
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the blocked order of weighted bags is for f16 tables and weights "
        "(products rounded to f16), combiner sum");
  if (!opt.weighted) weights = nullptr;
  switch (table.element_type()) {
    case ffi::DataType::F32: Run<float>(table, weights, plan, bags, width, opt, out); break;
    case ffi::DataType::BF16: Run<bf16>(table, weights, plan, bags, width, opt, out); break;
    case ffi::DataType::F16: Run<f16>(table, weights, plan, bags, width, opt, out); break;
    default: return ffi::Error::InvalidArgument("ember.padded_bag: unsupported table type");
  }
  return ffi::Error::Success();
}

}  // namespace ember
