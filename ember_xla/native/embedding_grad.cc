// ember.scatter_grad: indices[L], updates[L,D] -> [V,D]: the dense gradient of a row lookup,
// (gathered form: indices[L], source[S,D], source_rows[L] [, mask[L]], see grad_common.h)
// zeros(V, D) with each update added to row indices[i], exactly XLA's scatter-add (updates in
// index order per row; indices outside [0, V) dropped). Two ways, each part of the pool owning
// a range of rows:
// - scan (few threads): each part zeroes its rows, then walks all indices in order and adds
//   the updates that land in its rows -- XLA's own serial loop, split by destination, reading
//   the updates in order (one part below kScanSerialElements);
// - grouped (many threads, where every part reading every index would cost more than sorting
//   them once): the zeros are written by row ranges, then each part sums its touched rows'
//   updates and writes them (row_groups.h).
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "grad_common.h"
#include "handler.h"
#include "pages.h"

namespace ember {
namespace {

template <typename T>
void RunGrouped(const RowGroups& g, const UpdateRows& upd, int64_t v, int64_t d, T* out) {
  ParallelRows(v, 4096, [&](int64_t r0, int64_t r1) {
    std::memset(out + r0 * d, 0, static_cast<size_t>((r1 - r0) * d) * sizeof(T));
  });
  const GroupedRows rows = ResolveRows(g, upd);
  ParallelGroups(g, 0, [&](int64_t k0, int64_t k1) {
    ForGroupRange<T>(
        g, rows, d, k0, k1, [&](int64_t k) { __builtin_prefetch(out + g.rows[k] * d, 1); },
        [&](int64_t k, const float* acc) {
          T* o = out + g.rows[k] * d;
          for (int64_t j = 0; j < d; ++j) o[j] = Elem<T>::Store(acc[j]);
        });
  });
}

// The part owning rows [r0, r1): zero them, then add every update that lands there, in index
// order (each add rounded to T, as XLA's scatter computes in T). `add(o, u, d)` adds row u
// onto row o.
template <typename T, typename I, typename Add>
void ScanRows(const I* idx, int64_t n, const UpdateRows& upd, int64_t d, int64_t r0,
              int64_t r1, T* out, const Add& add) {
  std::memset(out + r0 * d, 0, static_cast<size_t>((r1 - r0) * d) * sizeof(T));
  const T* base = static_cast<const T*>(upd.base);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r < r0 || r >= r1 || (upd.mask && !upd.mask[i])) continue;
    int64_t row = i;
    if (upd.source_rows) {
      row = upd.rows32 ? static_cast<const int32_t*>(upd.source_rows)[i]
                       : static_cast<const int64_t*>(upd.source_rows)[i];
      row = std::min<int64_t>(std::max<int64_t>(row, 0), upd.source_count - 1);
    }
    add(out + r * d, base + row * d, d);
  }
}

template <typename T>
void AddRow(T* o, const T* u, int64_t d) {
  for (int64_t j = 0; j < d; ++j) o[j] = Elem<T>::Store(Elem<T>::Load(o[j]) + Elem<T>::Load(u[j]));
}

__attribute__((target("avx2"))) inline void AddRowF32Avx2(float* o, const float* u, int64_t d) {
  int64_t j = 0;
  for (; j + 8 <= d; j += 8)
    _mm256_storeu_ps(o + j, _mm256_add_ps(_mm256_loadu_ps(o + j), _mm256_loadu_ps(u + j)));
  for (; j < d; ++j) o[j] = o[j] + u[j];
}

template <typename T, typename I>
void Scan(const I* idx, int64_t n, const UpdateRows& upd, int64_t d, int64_t r0, int64_t r1,
          T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (HaveAvx2()) return ScanRows<float>(idx, n, upd, d, r0, r1, out, AddRowF32Avx2);
  }
  ScanRows<T>(idx, n, upd, d, r0, r1, out, AddRow<T>);
}

// Below this many update elements a call runs on the calling thread alone: waking the pool
// costs more than the adds (measured: 5000 x 64 f32 updates 0.52-0.57x of XLA:CPU's scatter
// on two threads, 1.07x on one).
constexpr int64_t kScanSerialElements = int64_t{1} << 20;

// The parts of the scan are row ranges, one per thread. (Column ranges of whole cache lines,
// which read no line twice, measured slower on two threads: 0.71-0.86x of XLA:CPU against
// 0.79-1.22x for row ranges at 100,000 x 32 to 200,000 x 64 updates.)
template <typename T>
void RunScan(const void* indices, bool index32, int64_t n, const UpdateRows& upd, int64_t v,
             int64_t d, T* out) {
  const int64_t threads = n * d < kScanSerialElements ? 1 : PoolThreads();
  RunCuts(EvenCuts(v, std::max<int64_t>(1, std::min<int64_t>(threads, v / 64))),
          [&](int64_t r0, int64_t r1) {
            if (index32)
              Scan(static_cast<const int32_t*>(indices), n, upd, d, r0, r1, out);
            else
              Scan(static_cast<const int64_t*>(indices), n, upd, d, r0, r1, out);
          });
}

// Every part reads every index in the scan: measured on two threads, kept to few parts (the
// grouped form, which sorts the indices once, serves larger pools as before).
constexpr int64_t kMaxScanParts = 4;

// The way to sum: EMBER_XLA_SCATTER_GRAD=scan or =grouped forces one (tests run both), else
// the scan on pools of at most kMaxScanParts threads.
bool UseScan() {
  const char* env = std::getenv("EMBER_XLA_SCATTER_GRAD");
  if (env != nullptr && std::strcmp(env, "scan") == 0) return true;
  if (env != nullptr && std::strcmp(env, "grouped") == 0) return false;
  return PoolThreads() <= kMaxScanParts;
}

template <typename T>
void Run(const ffi::AnyBuffer& indices, const UpdateRows& upd, int64_t v, int64_t d, T* out) {
  const bool index32 = indices.element_type() == ffi::DataType::S32;
  const int64_t n = indices.dimensions()[0];
  if (UseScan()) {
    RunScan(indices.untyped_data(), index32, n, upd, v, d, out);
    return;
  }
  RowGroups& g = ScratchGroups();
  BuildRowGroups(indices.untyped_data(), index32, n, v, &g);
  RunGrouped(g, upd, v, d, out);
}

ffi::Error ScatterGradImpl(ffi::AnyBuffer indices, ffi::AnyBuffer updates,
                           ffi::RemainingArgs rest, ffi::Result<ffi::AnyBuffer> out,
                           ffi::ThreadPool xla_pool) {
  XlaPoolScope pool_scope(&xla_pool);
  return Guarded("scatter_grad", [&]() -> ffi::Error {
    if (out->dimensions().size() != 2)
      return ffi::Error::InvalidArgument("ember.scatter_grad: the result must be [V, D]");
    const int64_t v = out->dimensions()[0], d = out->dimensions()[1];
    UpdateRows rows;
    if (auto e = GetUpdateRows("scatter_grad", indices, updates, rest, d, &rows); e.failure())
      return e;
    if (updates.element_type() != out->element_type())
      return ffi::Error::InvalidArgument("ember.scatter_grad: updates and result types differ");
    AdviseOutput(out->untyped_data(), out->size_bytes());  // fresh and written whole: huge pages
    switch (out->element_type()) {
      case ffi::DataType::F32:
        Run(indices, rows, v, d, static_cast<float*>(out->untyped_data()));
        break;
      case ffi::DataType::BF16:
        Run(indices, rows, v, d, static_cast<bf16*>(out->untyped_data()));
        break;
      case ffi::DataType::F16:
        Run(indices, rows, v, d, static_cast<f16*>(out->untyped_data()));
        break;
      default:
        return ffi::Error::InvalidArgument("ember.scatter_grad: updates must be f32/bf16/f16");
    }
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberScatterGrad, ember::ScatterGradImpl,
              EMBER_ARRAYS_2.RemainingArgs()
                  .Ret<xla::ffi::AnyBuffer>()
                  .Ctx<xla::ffi::ThreadPool>());
