// Attribute parsing, operand validation and the "plan" every kind is lowered to: for each output
// row, the ordered list of lookups that reduce into it (CSR), with lookups already resolved to
// table rows (wrap_negative + clip/fill applied).
#ifndef EMBER_XLA_NATIVE_PLAN_H_
#define EMBER_XLA_NATIVE_PLAN_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ember {

namespace ffi = xla::ffi;

enum class Combiner { kSum, kMax, kMin, kMean, kSqrtN };

struct Options {
  Combiner combiner = Combiner::kSum;
  bool clip = true;  // index_mode "clip" (else "fill"/"zero": out-of-range lookups give the
                     // fill row, D NaNs or, for "zero", D zeros)
  // index_mode "zero": jnp.take(mode="fill", fill_value=0) -- the fill row is D zeros, which
  // weights still multiply (0 * Inf is NaN, as XLA's select-then-multiply gives)
  bool fill_zero = false;
  bool wrap_negative = false;
  bool weighted = false;
  bool index32 = false;  // index_bits == 32: truncate to int32 (two's complement) after wrapping
  double init = 0.0;
  // f32 weighted padded bags: each weighted row is added with one fused multiply-add, as
  // XLA:CPU's reduce emitter does when the multiply is fused into the reduce (LLVM contracts
  // the multiply and the add); segment sums multiply in a separate loop and round the product.
  bool fused_multiply_add = false;
  // Padded bags: a trailing pred [B, P] operand masks lookups out (plan.src = kMaskedRow), as
  // ``select(mask, rows, 0)`` before the sum; `special` rows are then D NaNs and D zeros.
  bool masked = false;
  // Padded bags, attribute row_type "bf16": the f32 table's values are rounded to bf16 as they
  // are read (f32_as_bf16), the rows of XLA's gather of ``convert(table, bf16)``.
  bool rows_bf16 = false;
};

// Whether this CPU has FMA (XLA:CPU compiles for the host's features).
bool CpuHasFma();

ffi::Error ParseOptions(std::string_view combiner, std::string_view index_mode,
                        bool wrap_negative, bool weighted, double init, int64_t index_bits,
                        Options* out);

// Lookup index -> table row per Options: negative ids wrapped (wrap_negative), truncated to 32
// bits (index_bits = 32: XLA's s64 -> s32 convert keeps the low 32 bits), then clipped, or -1
// (the fill row: all NaN, all zero for index_mode "zero") when out of range in fill mode.
inline int64_t ResolveOne(int64_t i, int64_t n, const Options& opt) {
  if (opt.wrap_negative && i < 0) i += n;
  if (opt.index32) i = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(i)));
  if (opt.clip) return i < 0 ? 0 : (i >= n ? n - 1 : i);
  return (i < 0 || i >= n) ? -1 : i;
}

// plan.src of a lookup masked out of its padded bag (RowPointer: the all-zero row).
constexpr int64_t kMaskedRow = -2;

// The row entry `r` reads: table row r, or for r < 0 row -r-1 of `special` (the fill row --
// D NaNs, D zeros for index_mode "zero" --, then D zeros: the all-zero row of a masked lookup).
template <typename T>
__attribute__((always_inline)) inline const T* RowPointer(const T* table, const T* special,
                                                          int64_t r, int64_t d) {
  return r >= 0 ? table + r * d : special - (r + 1) * d;
}

struct Plan {
  int64_t rows = 0;              // output rows R
  std::vector<int64_t> row_ptr;  // R+1: entries of output row r are [row_ptr[r], row_ptr[r+1])
  // per entry k: table row, -1 for the all-NaN row (fill), or kMaskedRow for a lookup a
  // padded bag's mask drops (adds +0: nothing, as every sum starts at +0 and so is never -0)
  std::vector<int64_t> src;
  std::vector<int64_t> pos;      // per entry k: its lookup j (for weights); empty means j == k
  std::vector<int64_t> scratch_a, scratch_b;  // working space of the plan builders
  // Folded plan (sorted segment ids): no src array; entry k is lookup k, resolved in the
  // reduce loop from the caller's index operand (raw, s32 or s64) with ResolveOne.
  const void* raw = nullptr;
  bool raw64 = false;
  int64_t n_rows = 0;
  Options opt;

  // Entry k's table row (-1: the all-NaN row).
  __attribute__((always_inline)) int64_t Row(int64_t k) const {
    if (raw == nullptr) return src[k];
    const int64_t i = raw64 ? static_cast<const int64_t*>(raw)[k]
                            : static_cast<const int32_t*>(raw)[k];
    return ResolveOne(i, n_rows, opt);
  }
};

// A per-thread plan whose buffers are reused from call to call (no page faults or frees on the
// hot path); buffers far larger than the current call's needs are released first.
Plan& ScratchPlan(int64_t lookups, int64_t rows);
// The same for grouped calls: one reusable plan per slot (table) of this thread.
Plan& ScratchPlanAt(size_t slot, int64_t lookups, int64_t rows);

// Checks T (rank 2, f32/bf16/f16) and the result (rank 2 [rows, D], T's type or f32).
// With opt.rows_bf16: an f32 table and an f32 or bf16 result.
ffi::Error CheckTableAndResult(const ffi::AnyBuffer& table, const ffi::AnyBuffer& out,
                               bool rows_bf16 = false);

// Resolves lookups (s32/s64, any shape, read flat) to table rows per Options, in lookup order.
ffi::Error ResolveIndices(const ffi::AnyBuffer& idx, int64_t n_rows, const Options& opt,
                          std::vector<int64_t>* src);

// Turns plan->src (resolved lookups, in lookup order) into plan order for segment ids
// `segment_ids` (s32/s64, one per lookup): a stable counting sort by segment, dropping ids
// outside [0, plan->rows). Fills row_ptr and, when `need_pos`, pos.
ffi::Error SortBySegment(const ffi::AnyBuffer& segment_ids, bool need_pos, Plan* plan);

// The plan of a segment reduction: when the segment ids are sorted and in range (the usual
// sample-major layout) and every lookup keeps its place, only row_ptr is built and the lookups
// are resolved in the reduce loop (a folded plan: no resolve pass, no src array); otherwise
// ResolveIndices + SortBySegment.
ffi::Error BuildSegmentPlan(const ffi::AnyBuffer& indices, const ffi::AnyBuffer& segment_ids,
                            int64_t n_rows, const Options& opt, bool need_pos, Plan* plan);

// Reads an s32/s64 operand flat into int64.
ffi::Error ReadInts(const ffi::AnyBuffer& buf, std::string_view what, std::vector<int64_t>* out);

// Validates the optional trailing weights operand against `weighted`; on success *data is the
// weights' data (nullptr when unweighted) and *type its element type. Weights must have T's type
// or the result's type, and the same shape as the lookup operand `like`. The last `reserved`
// operands are the caller's (a padded bag's mask).
ffi::Error GetWeights(ffi::RemainingArgs rest, const Options& opt, const ffi::AnyBuffer& table,
                      const ffi::AnyBuffer& out, const ffi::AnyBuffer& like, const void** data,
                      ffi::DataType* type, size_t reserved = 0);

std::string_view DtypeName(ffi::DataType t);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_PLAN_H_
