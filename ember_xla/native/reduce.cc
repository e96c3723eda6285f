#include "reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>
#include <vector>

#include "common.h"
#include "isa.h"
#include "pages.h"
#include "test_fault.h"
#include "pool.h"
#include "reduce_parts.h"
#include "table_pages.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "reduce_vector_rows.h"

namespace ember {

namespace {

// XLA runs with the caller's MXCSR (on XLA:CPU: flush-to-zero + denormals-are-zero) and its
// max/min are hardware max/min instructions, which flush denormal operands to zero. Our
// compare+select max/min would not, so operands are multiplied by a 1 the compiler cannot
// fold: a no-op normally, the same flush as XLA's under DAZ. Adds and multiplies need nothing.
float OpaqueOne() {
  static volatile float one = 1.0f;
  return one;
}

#if defined(__x86_64__) && defined(__GNUC__)
// acc[c] += row[c] for the first d - d % 8 columns of an f16 row, in f32 (kRoundToF16: each sum
// rounded to f16, an f16 result): F16C widens 8 halves exactly (every f16 is a normal or zero
// f32; a signalling NaN comes out quiet, as the add makes it) and rounds with the immediate
// nearest-even mode (a sum of f16 values is never an f32 denormal, so MXCSR's FTZ/DAZ do not
// enter; XLA:CPU converts with the same instruction). Returns the columns done. A call per row from the AVX2 clone (GCC does not
// inline a target function into a template without the target).
template <bool kRoundToF16>
__attribute__((target("avx2,f16c"))) int64_t AddF16Rows8(float* __restrict acc,
                                                         const f16* __restrict row, int64_t d) {
  int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    __m256 sum = _mm256_add_ps(_mm256_loadu_ps(acc + c), _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c))));
    if constexpr (kRoundToF16)  // each f16 add rounded to f16 (nearest even), as XLA's convert
      sum = _mm256_cvtph_ps(_mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm256_storeu_ps(acc + c, sum);
  }
  return c;
}
#endif

// Kind: 0 = add, 1 = max, 2 = min. Every step is computed in float and rounded to O.
// Compiled twice (baseline SSE2 and AVX2, picked at run time): the same IEEE operations in the
// same order, so the same bits; AVX2 only halves the instructions per row, which lets the core
// keep about twice as many row loads in flight (~1.8x on the random-gather probe). No FMA.
template <int VL, int NVMax, typename T, typename O, int Kind, int W>
__attribute__((always_inline)) inline void RowsBody(const Job<T, O>& job, int64_t r0, int64_t r1,
                                                    float* __restrict acc) {
  if constexpr (std::is_same<T, float>::value && std::is_same<O, float>::value && W == 0) {
    // the vectorized loop (reduce_vector_rows.h): the sum, and max / min (VL floats in up to 8
    // registers: their selection needs a few more than the sum's add); same bits
    if constexpr (Kind == 0) {
      if (job.combiner == Combiner::kSum && job.d % VL == 0 && job.d > 0)
        return VectorRows<VL, NVMax, 0>(job, r0, r1, 1.0f);
    } else if (job.d % VL == 0 && job.d > 0) {
      return VectorRows<VL, 8, Kind>(job, r0, r1, OpaqueOne());
    }
  }
  using ET = Elem<T>;
  using EO = Elem<O>;
  const Plan& plan = *job.plan;
  const int64_t d = job.d;
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(T));
  const int64_t* __restrict pos = plan.pos.empty() ? nullptr : plan.pos.data();
  const int64_t* __restrict row_ptr = plan.row_ptr.data();
  const bool averaged = job.combiner == Combiner::kMean || job.combiner == Combiner::kSqrtN;
  const float start = averaged ? 0.0f : job.init;
  const float one = OpaqueOne();  // max / min multiply their operands by it
  // Prefetch runs kPrefetchAhead plan entries ahead across row boundaries, within this part.
  const int64_t k_begin = row_ptr[r0], k_end = row_ptr[r1];
  for (int64_t k = k_begin; k < k_begin + kPrefetchAhead && k < k_end; ++k)
    PrefetchRow(reinterpret_cast<const char*>(RowOf(job, k)), row_bytes);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t k0 = row_ptr[r], k1 = row_ptr[r + 1];
    for (int64_t c = 0; c < d; ++c) acc[c] = start;
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t kp = k + kPrefetchAhead;
      if (kp < k_end)
        PrefetchRow(reinterpret_cast<const char*>(RowOf(job, kp)), row_bytes);
      const T* __restrict row = RowOf(job, k);
      if (W == 0 && Kind == 0) {
        int64_t c = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        if constexpr (std::is_same<T, f16>::value && VL == 8)  // the AVX2 clone only
          c = AddF16Rows8<std::is_same<O, f16>::value>(acc, row, d);
#endif
        // The hot loop: contiguous loads and adds the compiler vectorizes.
        for (; c < d; ++c) acc[c] = EO::Round(acc[c] + ET::Load(row[c]));
        continue;
      }
      const int64_t j = pos ? pos[k] : k;  // the lookup, for its weight
      float w = 1.0f;
      if (W == 1) w = ET::Load(static_cast<const T*>(job.weights)[j]);
      if (W == 2) w = EO::Load(static_cast<const O*>(job.weights)[j]);
      if constexpr (W != 0 && Kind == 0 && std::is_same<O, float>::value &&
                    !(W == 1 && std::is_same<T, f16>::value)) {
        // the product is an f32 value (f32 rows; bf16 rows times their weight, kept in f32;
        // any rows times f32 weights): XLA:CPU's emitter contracts the multiply into the
        // reduce's add (f16 products are rounded to f16 first, so nothing is contracted)
        if (job.fma) {
          for (int64_t c = 0; c < d; ++c) acc[c] = std::fma(ET::Load(row[c]), w, acc[c]);
          continue;
        }
      }
      for (int64_t c = 0; c < d; ++c) {
        float v = ET::Load(row[c]);
        // With an f32 result, XLA:CPU keeps a bf16 product in f32 (bf16 arithmetic is
        // normalized to f32 and its excess-precision pass then drops the f32 -> bf16 -> f32
        // round trip before the convert); f16 arithmetic stays rounded to f16.
        if (W == 1 && !(std::is_same<T, bf16>::value && std::is_same<O, float>::value))
          v = ET::Round(v * w);
        else if (W != 0) v = EO::Round(v * w);
        if (Kind == 0) acc[c] = EO::Round(acc[c] + v);
        else if (Kind == 1) acc[c] = XlaMax(acc[c] * one, v * one);
        else acc[c] = XlaMin(acc[c] * one, v * one);
      }
    }
    O* __restrict o = job.out + r * job.out_stride;
    const int64_t count = k1 - k0;
    if (averaged && count == 0) {
      for (int64_t c = 0; c < d; ++c) o[c] = EO::Store(job.init);
    } else if (averaged) {
      // XLA's algebraic simplifier turns x / broadcast(n) into x * broadcast(1 / n) (and
      // 1 / sqrt into rsqrt), so that is the form whose bits we reproduce.
      const float n = static_cast<float>(count);
      const float scale = job.combiner == Combiner::kMean ? 1.0f / n : 1.0f / std::sqrt(n);
      for (int64_t c = 0; c < d; ++c) o[c] = EO::Store(acc[c] * scale);
    } else {
      for (int64_t c = 0; c < d; ++c) o[c] = EO::Store(acc[c]);
    }
  }
}

template <typename T, typename O, int Kind, int W>
void RowsBaseline(const Job<T, O>& job, int64_t r0, int64_t r1, float* acc) {
  RowsBody<4, 8, T, O, Kind, W>(job, r0, r1, acc);  // SSE2: 16 xmm registers
}

#if defined(__x86_64__) && defined(__GNUC__)
#define EMBER_HAVE_AVX2_CLONE 1
template <typename T, typename O, int Kind, int W>
__attribute__((target("avx2,fma,f16c"))) void RowsAvx2(const Job<T, O>& job, int64_t r0,
                                                       int64_t r1, float* acc) {
  RowsBody<8, 16, T, O, Kind, W>(job, r0, r1, acc);  // 16 ymm: a 128-float row in one pass
}
#endif

#ifdef EMBER_HAVE_AVX2_CLONE
// The unweighted f32 sum, max or min of rows of D a multiple of 16 on AVX-512 CPUs: 16-float
// vectors, so a 128-float row is 8 registers and its lookup 8 load+adds (AVX2: 16, all 16 ymm
// registers), and with 32 registers a 256-float max / min row is one pass over the lookups
// (AVX2: 4). The same lane-wise operations in the same order: the same bits. Measured in
// docs/BENCHMARKS.md.
template <int Kind>
__attribute__((target("avx512f"))) void VectorRowsAvx512(const Job<float, float>& job,
                                                         int64_t r0, int64_t r1) {
  VectorRows<16, 16, Kind>(job, r0, r1, Kind == 0 ? 1.0f : OpaqueOne());
}
#endif

template <typename T, typename O, int Kind, int W>
void Rows(const Job<T, O>& job, int64_t r0, int64_t r1, float* acc) {
#ifdef EMBER_HAVE_AVX2_CLONE
  const int level = IsaLevel();
  if constexpr (std::is_same<T, float>::value && std::is_same<O, float>::value && W == 0) {
    // unweighted f32: the sum (not the mean's or sqrtn's sum) and max / min of 16k-float rows
    if (level >= 2 && job.d % 16 == 0 && job.d > 0 &&
        (Kind != 0 || job.combiner == Combiner::kSum))
      return VectorRowsAvx512<Kind>(job, r0, r1);
  }
  if (level >= 1) return RowsAvx2<T, O, Kind, W>(job, r0, r1, acc);
#endif
  RowsBaseline<T, O, Kind, W>(job, r0, r1, acc);
}

// Runs rows [r0, r1) with the caller's floating-point control (FTZ/DAZ/rounding), so results
// never depend on which thread computed a row.
template <typename T, typename O, int Kind, int W>
void Part(const Job<T, O>& job, int64_t r0, int64_t r1, unsigned csr) {
#if defined(__SSE__)
  const unsigned saved = _mm_getcsr();
  if (saved != csr) _mm_setcsr(csr);
#endif
  constexpr int64_t kStack = 1024;
  float stack_acc[kStack];
  std::vector<float> heap_acc;
  float* acc = stack_acc;
  if (job.d > kStack) {
    heap_acc.resize(static_cast<size_t>(job.d));
    acc = heap_acc.data();
  }
  Rows<T, O, Kind, W>(job, r0, r1, acc);
#if defined(__SSE__)
  if (saved != csr) _mm_setcsr(saved);
#endif
}

template <typename T, typename O, int Kind, int W>
void RunParallel(const Job<T, O>& job) {
  const Plan& plan = *job.plan;
  const int64_t rows = plan.rows;
  if (rows == 0) return;
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
#else
  const unsigned csr = 0;
#endif
  const int64_t base = plan.row_ptr[0];
  auto cost = [&](int64_t r) { return plan.row_ptr[r] - base + r; };  // lookups + rows
  const int64_t total = cost(rows);
  int64_t threads = std::min<int64_t>(PoolThreads(),
                                      std::max<int64_t>(1, total * job.d / kParallelWork));
  int64_t parts = std::min<int64_t>(threads > 1 ? threads * kPartsPerThread : 1, rows);
  if (parts <= 1) {
    Part<T, O, Kind, W>(job, 0, rows, csr);
    return;
  }
  // Split output rows so every part gets about the same number of lookups + rows.
  const std::vector<int64_t> cut = BalancedCuts(rows, parts, total, cost);
  PoolRun(parts, [&](int64_t p) {
    if (cut[p] < cut[p + 1]) Part<T, O, Kind, W>(job, cut[p], cut[p + 1], csr);
  });
}

template <typename T, typename O, int W>
void RunKind(const Job<T, O>& job) {
  switch (job.combiner) {
    case Combiner::kMax: RunParallel<T, O, 1, W>(job); break;
    case Combiner::kMin: RunParallel<T, O, 2, W>(job); break;
    default: RunParallel<T, O, 0, W>(job); break;
  }
}

template <typename T, typename O>
void RunTyped(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
              ffi::DataType wtype, const Options& opt, ffi::AnyBuffer& out) {
  const int64_t d = table.dimensions()[1];
  std::vector<T> nan_row;  // the special rows (plan.h RowPointer): D NaNs, then D zeros
  if (!opt.clip || opt.masked) {
    nan_row.assign(static_cast<size_t>(2 * d), Elem<T>::Store(0.0f));
    if (!opt.fill_zero)
      std::fill(nan_row.begin(), nan_row.begin() + d, Elem<T>::Store(std::nanf("")));
  }
  Job<T, O> job{static_cast<const T*>(table.untyped_data()),
                nan_row.data(),
                weights,
                &plan,
                opt.combiner,
                d,
                Elem<O>::Round(static_cast<float>(opt.init)),
                static_cast<O*>(out.untyped_data()),
                d};
  job.fma = opt.fused_multiply_add;
  if (weights == nullptr) RunKind<T, O, 0>(job);
  else if (wtype == table.element_type()) RunKind<T, O, 1>(job);
  else RunKind<T, O, 2>(job);
}

template <typename T, typename O, int W>
void SetRun(const Job<T, O>& job, ItemRunner* runner) {
  switch (job.combiner) {
    case Combiner::kMax:
      runner->run = [job](int64_t r0, int64_t r1, unsigned csr) {
        Part<T, O, 1, W>(job, r0, r1, csr);
      };
      break;
    case Combiner::kMin:
      runner->run = [job](int64_t r0, int64_t r1, unsigned csr) {
        Part<T, O, 2, W>(job, r0, r1, csr);
      };
      break;
    default:
      runner->run = [job](int64_t r0, int64_t r1, unsigned csr) {
        Part<T, O, 0, W>(job, r0, r1, csr);
      };
      break;
  }
}

// `weights` (nullptr: unweighted) of type `wtype`, as for RunPlan.
template <typename T, typename O>
void MakeRunner(const GroupItem& item, const Options& opt, ItemRunner* runner,
                const void* weights = nullptr, ffi::DataType wtype = ffi::DataType::F32) {
  const int64_t d = item.table->dimensions()[1];
  T* nan_row = nullptr;  // clip mode never reads it (every lookup resolves to a row)
  if (!opt.clip) {
    runner->nan_storage.assign(static_cast<size_t>(d), 0.0f);
    nan_row = reinterpret_cast<T*>(runner->nan_storage.data());
    const float fill = opt.fill_zero ? 0.0f : std::nanf("");
    for (int64_t c = 0; c < d; ++c) nan_row[c] = Elem<T>::Store(fill);
  }
  Job<T, O> job{static_cast<const T*>(item.table->untyped_data()),
                nan_row,
                weights,
                item.plan,
                opt.combiner,
                d,
                Elem<O>::Round(static_cast<float>(opt.init)),
                static_cast<O*>(item.out_base ? item.out_base : item.out->untyped_data()),
                item.out_stride ? item.out_stride : d};
  job.fma = opt.fused_multiply_add;
  if (weights == nullptr) SetRun<T, O, 0>(job, runner);
  else if (wtype == item.table->element_type()) SetRun<T, O, 1>(job, runner);
  else SetRun<T, O, 2>(job, runner);
}

}  // namespace

ffi::Error MakeItemRunner(const GroupItem& it, const Options& opt, ItemRunner* runner,
                          const void* w, ffi::DataType wt) {
  const bool f32_out = it.out->element_type() == ffi::DataType::F32;
  switch (it.table->element_type()) {
    case ffi::DataType::F32: MakeRunner<float, float>(it, opt, runner, w, wt); break;
    case ffi::DataType::BF16:
      if (f32_out) MakeRunner<bf16, float>(it, opt, runner, w, wt);
      else MakeRunner<bf16, bf16>(it, opt, runner, w, wt);
      break;
    case ffi::DataType::F16:
      if (f32_out) MakeRunner<f16, float>(it, opt, runner, w, wt);
      else MakeRunner<f16, f16>(it, opt, runner, w, wt);
      break;
    default:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "ember: unsupported table type");
  }
  return ffi::Error::Success();
}

bool CpuHasFma() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return has;
#elif defined(__aarch64__)
  return true;  // every AArch64 core has fused multiply-add
#else
  return false;
#endif
}

ffi::Error RunPlan(const ffi::AnyBuffer& table, const Plan& plan, const void* weights,
                   ffi::DataType wtype, const Options& opt, ffi::AnyBuffer& out) {
  AdviseOutput(out.untyped_data(), out.size_bytes());
  AdviseTable(table.untyped_data(), table.size_bytes());
  const bool f32_out = out.element_type() == ffi::DataType::F32;
  switch (table.element_type()) {
    case ffi::DataType::F32:
      if (!opt.rows_bf16) RunTyped<float, float>(table, plan, weights, wtype, opt, out);
      else if (f32_out) RunTyped<f32_as_bf16, float>(table, plan, weights, wtype, opt, out);
      else RunTyped<f32_as_bf16, bf16>(table, plan, weights, wtype, opt, out);
      break;
    case ffi::DataType::BF16:
      if (f32_out) RunTyped<bf16, float>(table, plan, weights, wtype, opt, out);
      else RunTyped<bf16, bf16>(table, plan, weights, wtype, opt, out);
      break;
    case ffi::DataType::F16:
      if (f32_out) RunTyped<f16, float>(table, plan, weights, wtype, opt, out);
      else RunTyped<f16, f16>(table, plan, weights, wtype, opt, out);
      break;
    default:
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "ember: unsupported table type");
  }
  InjectTestFault(out);
  return ffi::Error::Success();
}

}  // namespace ember
