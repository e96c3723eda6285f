// Padded sum/mean bags in the orders of XLA:CPU's own loops (window_sum.h): 8 vector lanes
// folded in halves (25..32 rows) and tree-reduction windows of 32 rows (more than 32).
#include "window_sum.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "padded_parts.h"

namespace ember {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kWindow = 32;

// acc[c] += row p of bag `src` (a fill-mode miss adds NaN).
template <typename T>
inline void AddRow(const T* __restrict table, const int64_t* src, int64_t p, int64_t d,
                   float* __restrict acc) {
  const int64_t row = src[p];
  if (row == kMaskedRow) return;  // adds +0 to a sum started at +0: nothing
  if (row < 0) {
    const float nan = std::nanf("");
    for (int64_t c = 0; c < d; ++c) acc[c] = acc[c] + nan;
    return;
  }
  const T* r = table + row * d;
  for (int64_t c = 0; c < d; ++c) acc[c] = acc[c] + Elem<T>::Load(r[c]);
}

template <typename T>
void Vector8(const T* table, const int64_t* src, int64_t width, int64_t d, float* acc,
             float* o) {
  std::fill(acc, acc + kLanes * d, 0.0f);
  const int64_t full = width / kLanes * kLanes;
  for (int64_t p = 0; p < full; ++p) AddRow(table, src, p, d, acc + (p % kLanes) * d);
  for (int64_t half = kLanes / 2; half >= 1; half /= 2) {
    for (int64_t j = 0; j < half; ++j) {
      float* a = acc + j * d;
      const float* b = acc + (j + half) * d;
      for (int64_t c = 0; c < d; ++c) a[c] = a[c] + b[c];
    }
  }
  for (int64_t p = full; p < width; ++p) AddRow(table, src, p, d, acc);
  std::copy(acc, acc + d, o);
}

template <typename T>
void Tree32(const T* table, const int64_t* src, int64_t width, int64_t d, float* acc,
            float* o) {
  float* win = acc;
  float* top = acc + d;
  std::fill(top, top + d, 0.0f);
  const int64_t windows = (width + kWindow - 1) / kWindow;
  const int64_t low = (windows * kWindow - width) / 2;
  for (int64_t w = 0; w < windows; ++w) {
    std::fill(win, win + d, 0.0f);
    const int64_t p0 = std::max<int64_t>(0, w * kWindow - low);
    const int64_t p1 = std::min<int64_t>(width, (w + 1) * kWindow - low);
    for (int64_t p = p0; p < p1; ++p) AddRow(table, src, p, d, win);
    for (int64_t c = 0; c < d; ++c) top[c] = top[c] + win[c];
  }
  std::copy(top, top + d, o);
}

template <typename T>
void Bags(const T* table, const Plan& plan, int64_t b0, int64_t b1, int64_t width, int64_t d,
          WindowOrder order, bool mean, float* out) {
  std::vector<float> acc(static_cast<size_t>(kLanes * d));
  const float scale = 1.0f / static_cast<float>(width);
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t* src = plan.src.data() + b * width;
    float* o = out + b * d;
    if (order == WindowOrder::kVector8) Vector8<T>(table, src, width, d, acc.data(), o);
    else Tree32<T>(table, src, width, d, acc.data(), o);
    if (mean) for (int64_t c = 0; c < d; ++c) o[c] = o[c] * scale;
  }
}

template <typename T>
void Run(const ffi::AnyBuffer& table, const Plan& plan, int64_t bags, int64_t width,
         WindowOrder order, bool mean, ffi::AnyBuffer& out) {
  const T* t = static_cast<const T*>(table.untyped_data());
  const int64_t d = table.dimensions()[1];
  float* o = static_cast<float*>(out.untyped_data());
  RunBagParts(bags, width, d, [&](int64_t b0, int64_t b1) {
    Bags<T>(t, plan, b0, b1, width, d, order, mean, o);
  });
}

}  // namespace

ffi::Error RunWindowedPaddedSum(const ffi::AnyBuffer& table, const Plan& plan, int64_t bags,
                                int64_t width, WindowOrder order, const Options& opt,
                                ffi::AnyBuffer& out) {
  if (out.element_type() != ffi::DataType::F32)
    return ffi::Error::InvalidArgument("ember.padded_bag: this sum_order needs an f32 result");
  if ((opt.combiner != Combiner::kSum && opt.combiner != Combiner::kMean) || opt.weighted ||
      opt.init != 0.0)
    return ffi::Error::InvalidArgument(
        "ember.padded_bag: the vector8 and tree32 orders are for unweighted sum/mean bags "
        "starting at 0");
  const bool mean = opt.combiner == Combiner::kMean;
  return WithTableType(table.element_type(), opt.rows_bf16, [&](auto tag) {
    Run<decltype(tag)>(table, plan, bags, width, order, mean, out);
  });
}

}  // namespace ember
