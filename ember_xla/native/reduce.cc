#include "reduce.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "common.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ember {

namespace {

// Below this many (lookups + rows) * D element-steps a call stays on one thread.
constexpr int64_t kParallelWork = 1 << 16;
constexpr int64_t kMaxThreads = 8;
constexpr int64_t kPrefetchAhead = 4;

template <typename T>
struct Job {
  const T* table;
  const T* nan_row;  // D quiet NaNs, for fill-mode misses
  const T* weights;  // nullptr unless weighted
  const Plan* plan;
  Options opt;
  int64_t d;
  float init;  // init rounded to T, as float
  T* out;
};

template <typename T>
inline const T* RowOf(const Job<T>& job, int64_t j) {
  const int64_t r = job.plan->src[j];
  return r >= 0 ? job.table + r * job.d : job.nan_row;
}

template <typename T>
inline void Prefetch(const Job<T>& job, const int64_t* pos, int64_t k, int64_t end) {
  if (k >= end) return;
  const char* p = reinterpret_cast<const char*>(RowOf(job, pos ? pos[k] : k));
  const int64_t bytes = job.d * static_cast<int64_t>(sizeof(T));
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
}

// One step of the combiner, rounded to T; Kind 0 = add, 1 = max, 2 = min.
template <typename T, int Kind, bool W>
void Rows(const Job<T>& job, int64_t r0, int64_t r1, float* acc) {
  using E = Elem<T>;
  const Plan& plan = *job.plan;
  const int64_t d = job.d;
  const int64_t* pos = plan.pos.empty() ? nullptr : plan.pos.data();
  const bool averaged = job.opt.combiner == Combiner::kMean ||
                        job.opt.combiner == Combiner::kSqrtN;
  const float start = averaged ? 0.0f : job.init;
  // XLA runs with the caller's MXCSR (on XLA:CPU: flush-to-zero + denormals-are-zero) and its
  // max/min are hardware max/min instructions, which flush denormal operands to zero. Our
  // compare+select max/min would not, so operands are multiplied by a 1 the compiler cannot
  // fold: a no-op normally, the same flush as XLA's under DAZ. Adds and multiplies need nothing.
  static volatile float kOne = 1.0f;
  const float one = kOne;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t k0 = plan.row_ptr[r], k1 = plan.row_ptr[r + 1];
    for (int64_t c = 0; c < d; ++c) acc[c] = start;
    for (int64_t k = k0; k < k0 + kPrefetchAhead && k < k1; ++k) Prefetch(job, pos, k, k1);
    for (int64_t k = k0; k < k1; ++k) {
      Prefetch(job, pos, k + kPrefetchAhead, k1);
      const int64_t j = pos ? pos[k] : k;
      const T* __restrict row = RowOf(job, j);
      const float w = W ? E::Load(job.weights[j]) : 1.0f;
      for (int64_t c = 0; c < d; ++c) {
        float v = E::Load(row[c]);
        if (W) v = E::Round(v * w);
        if (Kind == 0) acc[c] = E::Round(acc[c] + v);
        else if (Kind == 1) acc[c] = XlaMax(acc[c] * one, v * one);
        else acc[c] = XlaMin(acc[c] * one, v * one);
      }
    }
    T* o = job.out + r * d;
    const int64_t count = k1 - k0;
    if (averaged && count == 0) {
      for (int64_t c = 0; c < d; ++c) o[c] = E::Store(job.init);
    } else if (averaged) {
      // XLA's algebraic simplifier turns x / broadcast(n) into x * broadcast(1 / n) (and
      // 1 / sqrt into rsqrt), so that is the form whose bits we reproduce.
      const float n = static_cast<float>(count);
      const float scale =
          job.opt.combiner == Combiner::kMean ? 1.0f / n : 1.0f / std::sqrt(n);
      for (int64_t c = 0; c < d; ++c) o[c] = E::Store(acc[c] * scale);
    } else {
      for (int64_t c = 0; c < d; ++c) o[c] = E::Store(acc[c]);
    }
  }
}

// Worker threads take the caller's floating-point control (FTZ/DAZ/rounding) so that results
// never depend on which thread computed a row.
template <typename T, int Kind, bool W>
void RowsWithBuffer(const Job<T>& job, int64_t r0, int64_t r1, unsigned csr) {
#if defined(__SSE__)
  _mm_setcsr(csr);
#endif
  std::vector<float> acc(static_cast<size_t>(job.d));
  Rows<T, Kind, W>(job, r0, r1, acc.data());
}

template <typename T, int Kind, bool W>
void RunParallel(const Job<T>& job) {
  const Plan& plan = *job.plan;
  const int64_t rows = plan.rows;
  if (rows == 0) return;
  const int64_t base = plan.row_ptr[0];
  auto cost = [&](int64_t r) { return plan.row_ptr[r] - base + r; };  // lookups + rows
  const int64_t total = cost(rows);
  int64_t threads = std::min<int64_t>(std::thread::hardware_concurrency(), kMaxThreads);
  threads = std::min<int64_t>(threads, std::max<int64_t>(1, total * job.d / kParallelWork));
  threads = std::min<int64_t>(threads, rows);
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#else
  const unsigned csr = 0;
#endif
  if (threads <= 1) {
    RowsWithBuffer<T, Kind, W>(job, 0, rows, csr);
    return;
  }
  // Split output rows so every thread gets about the same number of lookups + rows.
  std::vector<int64_t> cut(threads + 1, rows);
  cut[0] = 0;
  for (int64_t t = 1; t < threads; ++t) {
    int64_t lo = cut[t - 1], hi = rows, goal = total * t / threads;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (cost(mid) < goal) lo = mid + 1; else hi = mid;
    }
    cut[t] = lo;
  }
  std::vector<std::thread> pool;
  std::vector<int64_t> inline_parts;
  for (int64_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(RowsWithBuffer<T, Kind, W>, std::cref(job), cut[t], cut[t + 1],
                        csr);
    } catch (const std::exception&) {
      inline_parts.push_back(t);  // could not start a thread: do that part here
    }
  }
  RowsWithBuffer<T, Kind, W>(job, cut[0], cut[1], csr);
  for (int64_t t : inline_parts) RowsWithBuffer<T, Kind, W>(job, cut[t], cut[t + 1], csr);
  for (auto& th : pool) th.join();
}

template <typename T>
void RunTyped(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
              const Options& opt, ffi::AnyBuffer& out) {
  using E = Elem<T>;
  const int64_t d = table.dimensions()[1];
  std::vector<T> nan_row;
  if (!opt.clip) nan_row.assign(static_cast<size_t>(d), E::Store(std::nanf("")));
  Job<T> job{static_cast<const T*>(table.untyped_data()),
             nan_row.data(),
             static_cast<const T*>(weights),
             &plan,
             opt,
             d,
             E::Round(static_cast<float>(opt.init)),
             static_cast<T*>(out.untyped_data())};
  const bool w = weights != nullptr;
  switch (opt.combiner) {
    case Combiner::kMax:
      w ? RunParallel<T, 1, true>(job) : RunParallel<T, 1, false>(job);
      break;
    case Combiner::kMin:
      w ? RunParallel<T, 2, true>(job) : RunParallel<T, 2, false>(job);
      break;
    default:
      w ? RunParallel<T, 0, true>(job) : RunParallel<T, 0, false>(job);
      break;
  }
}

}  // namespace

ffi::Error RunPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                   const Options& opt, ffi::AnyBuffer& out) {
  switch (table.element_type()) {
    case ffi::DataType::F32:
      RunTyped<float>(table, plan, weights, opt, out);
      break;
    case ffi::DataType::BF16:
      RunTyped<bf16>(table, plan, weights, opt, out);
      break;
    case ffi::DataType::F16:
      RunTyped<f16>(table, plan, weights, opt, out);
      break;
    default:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "ember: unsupported table type");
  }
  return ffi::Error::Success();
}

}  // namespace ember
