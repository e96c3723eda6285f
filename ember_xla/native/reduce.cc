#include "reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common.h"
#include "pages.h"
#include "test_fault.h"
#include "pool.h"
#include "reduce_parts.h"
#include "reduce_minmax.h"
#include "table_pages.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#ifndef EMBER_PREFETCH_LOOKUPS
#define EMBER_PREFETCH_LOOKUPS 16
#endif

namespace ember {

namespace {

// Software prefetch distance in lookups (16 like FBGEMM; 8-16 measured alike here, 4 worse).
constexpr int64_t kPrefetchAhead = EMBER_PREFETCH_LOOKUPS;

// W: 0 unweighted, 1 weights of T's type (product rounded to T), 2 weights of O's type.
template <typename T, typename O>
struct Job {
  const T* table;
  const T* nan_row;    // D quiet NaNs, for fill-mode misses
  const void* weights;  // nullptr unless weighted
  const Plan* plan;
  Combiner combiner;
  int64_t d;
  float init;  // init rounded to O, as float
  O* out;
  int64_t out_stride;  // elements from one output row to the next (d, or sum D when the
                       // result is the tables' concatenated [rows, sum D] layout)
  bool fma = false;    // f32 weighted: acc = fma(row, weight, acc) (Options::fused_multiply_add)
};

template <typename T, typename O>
inline const T* RowOf(const Job<T, O>& job, int64_t k) {
  const int64_t r = job.plan->Row(k);
  return r >= 0 ? job.table + r * job.d : job.nan_row;
}

inline void PrefetchRow(const char* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, EMBER_PREFETCH_LOCALITY);
}

// Rows read in several passes (wider than the registers hold) are re-read from cache after
// the first pass: prefetch them into all cache levels (prefetcht0), not non-temporally.
#ifndef EMBER_PREFETCH_LOCALITY_MULTIPASS
#define EMBER_PREFETCH_LOCALITY_MULTIPASS 3
#endif
inline void PrefetchRowKeep(const char* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64)
    __builtin_prefetch(p + b, 0, EMBER_PREFETCH_LOCALITY_MULTIPASS);
}

// The hot case (f32 table and result, unweighted sum, D a multiple of the vector width): each
// output row's accumulator lives in vector registers (up to NV vectors of VL floats per pass
// over the row's lookups; wider rows take several passes, the later ones hitting cache), so a
// lookup costs one load+add per vector and the core keeps many row loads in flight. Lane-wise
// IEEE adds in lookup order: the same bits as the scalar loop.
template <int VL> struct Vec;
template <> struct Vec<4> {
  typedef float V __attribute__((vector_size(16)));
  typedef float VU __attribute__((vector_size(16), aligned(4)));
};
template <> struct Vec<8> {
  typedef float V __attribute__((vector_size(32)));
  typedef float VU __attribute__((vector_size(32), aligned(4)));
};

template <int VL, int NV>
__attribute__((always_inline)) inline void SumChunk(const Job<float, float>& job, int64_t r0,
                                                    int64_t r1, int64_t c0, bool prefetch,
                                                    int64_t k_limit, bool prologue,
                                                    bool keep) {
  using V = typename Vec<VL>::V;
  using VU = typename Vec<VL>::VU;
  const Plan& plan = *job.plan;
  const int64_t d = job.d;
  const int64_t* __restrict row_ptr = plan.row_ptr.data();
  const int64_t k_end = k_limit;  // prefetch runs ahead up to the end of the part
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(float));
  V start;
  for (int l = 0; l < VL; ++l) start[l] = job.init;
  // A folded plan over s32 ids (the usual case) resolves lookups here with the plan's fields
  // read once into locals: Plan::Row re-reads them through the plan for every lookup.
  const int32_t* raw32 =
      plan.raw != nullptr && !plan.raw64 ? static_cast<const int32_t*>(plan.raw) : nullptr;
  const Options opt = plan.opt;
  const int64_t n_rows = plan.n_rows;
  const float* const table = job.table;
  const float* const nan_row = job.nan_row;
  auto row_of = [raw32, opt, n_rows, table, nan_row, d, &job](int64_t k) -> const float* {
    if (raw32 == nullptr) return RowOf(job, k);
    const int64_t r = ResolveOne(raw32[k], n_rows, opt);
    return r >= 0 ? table + r * d : nan_row;
  };
  auto pf = [&](int64_t k) {
    const char* p = reinterpret_cast<const char*>(row_of(k));
    if (keep) PrefetchRowKeep(p, row_bytes); else PrefetchRow(p, row_bytes);
  };
  if (prefetch && prologue) {
    for (int64_t k = row_ptr[r0]; k < row_ptr[r0] + kPrefetchAhead && k < k_end; ++k) pf(k);
  }
  for (int64_t r = r0; r < r1; ++r) {
    V acc[NV];
    for (int i = 0; i < NV; ++i) acc[i] = start;
    for (int64_t k = row_ptr[r], k1 = row_ptr[r + 1]; k < k1; ++k) {
      if (prefetch && k + kPrefetchAhead < k_end) pf(k + kPrefetchAhead);
      const float* row = row_of(k) + c0;
      for (int i = 0; i < NV; ++i) acc[i] += *reinterpret_cast<const VU*>(row + i * VL);
    }
    float* o = job.out + r * job.out_stride + c0;
    for (int i = 0; i < NV; ++i) *reinterpret_cast<VU*>(o + i * VL) = acc[i];
  }
}

// D = VL * (16 a + 8 b + 4 c + 2 e + f) floats, in passes of 16, 8, 4, 2, 1 vectors. A row
// wider than one pass is finished (all its passes) before the next row starts: the later
// passes re-read the row's lookups from L1/L2, and only the first pass prefetches (ahead
// across rows, to the end of the part). Passes over all rows of a part instead re-read every
// lookup from DRAM (measured: segment_max D=256 at break-even with XLA).
template <int VL, int NVMax>
__attribute__((always_inline)) inline void SumRowsVector(const Job<float, float>& job,
                                                         int64_t r0, int64_t r1) {
  const int64_t d = job.d;
  const int64_t k_end = job.plan->row_ptr[r1];
  const bool one_pass = d / VL <= NVMax;
  for (int64_t r = r0; r < r1; r = one_pass ? r1 : r + 1) {
    const int64_t re = one_pass ? r1 : r + 1;
    int64_t c0 = 0;
    while (c0 < d) {
      const int64_t left = (d - c0) / VL;
      const bool first = c0 == 0, pro = first && r == r0;
      int64_t nv = 1;
      if (NVMax >= 16 && left >= 16)
        SumChunk<VL, (NVMax >= 16 ? 16 : 1)>(job, r, re, c0, first, k_end, pro, !one_pass), nv = 16;
      else if (left >= 8) SumChunk<VL, 8>(job, r, re, c0, first, k_end, pro, !one_pass), nv = 8;
      else if (left >= 4) SumChunk<VL, 4>(job, r, re, c0, first, k_end, pro, !one_pass), nv = 4;
      else if (left >= 2) SumChunk<VL, 2>(job, r, re, c0, first, k_end, pro, !one_pass), nv = 2;
      else SumChunk<VL, 1>(job, r, re, c0, first, k_end, pro, !one_pass);
      c0 += nv * VL;
    }
  }
}

// Kind: 0 = add, 1 = max, 2 = min. Every step is computed in float and rounded to O.
// Compiled twice (baseline SSE2 and AVX2, picked at run time): the same IEEE operations in the
// same order, so the same bits; AVX2 only halves the instructions per row, which lets the core
// keep about twice as many row loads in flight (~1.8x on the random-gather probe). No FMA.
template <int VL, int NVMax, typename T, typename O, int Kind, int W>
__attribute__((always_inline)) inline void RowsBody(const Job<T, O>& job, int64_t r0, int64_t r1,
                                                    float* __restrict acc) {
  if constexpr (std::is_same<T, float>::value && std::is_same<O, float>::value && Kind == 0 &&
                W == 0) {
    if (job.combiner == Combiner::kSum && job.d % VL == 0 && job.d > 0) {
      SumRowsVector<VL, NVMax>(job, r0, r1);
      return;
    }
  }
  if constexpr (std::is_same<T, float>::value && std::is_same<O, float>::value && Kind != 0 &&
                W == 0) {
    if (job.d % VL == 0 && job.d > 0) {  // vectorized max/min: reduce_minmax.h, same bits
      static volatile float kOneV = 1.0f;
      minmax::Rows<VL, Kind, Job<float, float>, Vec<VL>>(job, r0, r1, kOneV, kPrefetchAhead);
      return;
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
  // XLA runs with the caller's MXCSR (on XLA:CPU: flush-to-zero + denormals-are-zero) and its
  // max/min are hardware max/min instructions, which flush denormal operands to zero. Our
  // compare+select max/min would not, so operands are multiplied by a 1 the compiler cannot
  // fold: a no-op normally, the same flush as XLA's under DAZ. Adds and multiplies need nothing.
  static volatile float kOne = 1.0f;
  const float one = kOne;
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
        // The hot loop: contiguous loads and adds the compiler vectorizes.
        for (int64_t c = 0; c < d; ++c) acc[c] = EO::Round(acc[c] + ET::Load(row[c]));
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
__attribute__((target("avx2,fma"))) void RowsAvx2(const Job<T, O>& job, int64_t r0,
                                                  int64_t r1, float* acc) {
  RowsBody<8, 16, T, O, Kind, W>(job, r0, r1, acc);  // 16 ymm: a 128-float row in one pass
}
#endif

// AVX2+FMA (std::fma inlined) when the CPU has them, unless EMBER_XLA_ISA=baseline (to compare).
bool UseAvx2() {
#ifdef EMBER_HAVE_AVX2_CLONE
  static const bool use = [] {
    const char* isa = std::getenv("EMBER_XLA_ISA");
    if (isa != nullptr && std::string_view(isa) == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  }();
  return use;
#else
  return false;
#endif
}

template <typename T, typename O, int Kind, int W>
void Rows(const Job<T, O>& job, int64_t r0, int64_t r1, float* acc) {
#ifdef EMBER_HAVE_AVX2_CLONE
  if (UseAvx2()) return RowsAvx2<T, O, Kind, W>(job, r0, r1, acc);
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
  std::vector<T> nan_row;
  if (!opt.clip) nan_row.assign(static_cast<size_t>(d), Elem<T>::Store(std::nanf("")));
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
    for (int64_t c = 0; c < d; ++c) nan_row[c] = Elem<T>::Store(std::nanf(""));
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
      RunTyped<float, float>(table, plan, weights, wtype, opt, out);
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
