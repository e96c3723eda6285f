// Memoised callback firings for the executor's addresses mode (machine.h). A firing's effects
// there — its op counts, its checks, the registers it leaves behind — are a function of what
// it reads: the live-in registers (read before the case writes them) and the entries it pops.
// Table rows and outputs are unknown, never read; inputs never change. So when a case fires
// again with the same live-in values and the same kind of entries, the recorded effects are
// replayed (the entries popped, the registers that anything else reads restored, the counts
// added) instead of interpreting the case again. A case whose firing could have other effects
// (nested pops, engine runs, allocations, trace events, stores of known data) is never
// memoised.
#ifndef EMBER_XLA_EMULATOR_NATIVE_CASE_MEMO_H_
#define EMBER_XLA_EMULATOR_NATIVE_CASE_MEMO_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "machine.h"

namespace ember_emu {

// Equal as far as a firing can tell: shape, known-ness, the values of known scalars and
// vectors (bit for bit), the same buffer object.
inline bool SameValue(const Value& a, const Value& b) {
  if (a.lanes == 0 && b.lanes == 0 && a.set && b.set && a.known && b.known && a.dt == b.dt &&
      !IsFloat(a.dt))
    return a.i[0] == b.i[0];  // (the common key: a known integer scalar)
  if (a.set != b.set || a.known != b.known || a.dt != b.dt || a.lanes != b.lanes) return false;
  if (!a.set) return true;
  if (a.lanes == -1) return a.m == b.m;
  if (!a.known) return true;
  const size_t n = (size_t)a.n();
  if (!IsFloat(a.dt)) {  // (compared inline: mostly one lane)
    for (size_t k = 0; k < n; ++k)
      if (a.i[k] != b.i[k]) return false;
    return true;
  }
  for (size_t k = 0; k < n; ++k) {  // bit for bit
    uint64_t x, y;
    std::memcpy(&x, &a.f[k], 8);
    std::memcpy(&y, &b.f[k], 8);
    if (x != y) return false;
  }
  return true;
}

// Equal as a popped entry: a buffer without data (a row of table data) of the same dtype,
// shape and address; else SameValue.
inline bool SameEntry(const Value& a, const Value& b) {
  if (a.lanes != -1 || b.lanes != -1) return SameValue(a, b);
  if (!a.m || !b.m || a.m->data || b.m->data) return a.m == b.m;
  if (a.m == b.m) return a.dt == b.dt;  // the one data-less buffer of its shape
  return a.dt == b.dt && a.m->dtype == b.m->dtype && a.m->shape == b.m->shape &&
         a.m->base == b.m->base;
}

// dst = src without reallocating lanes of the same count and without reference-count traffic
// when dst holds src's buffer already (a replayed firing's registers mostly do).
inline void AssignValue(Value& dst, const Value& src) {
  dst.dt = src.dt, dst.lanes = src.lanes, dst.set = src.set, dst.known = src.known;
  if (dst.f.size() == src.f.size())
    std::copy(src.f.begin(), src.f.end(), dst.f.begin());
  else
    dst.f = src.f;
  if (dst.i.size() == src.i.size())
    std::copy(src.i.begin(), src.i.end(), dst.i.begin());
  else
    dst.i = src.i;
  if (dst.m != src.m) dst.m = src.m;
}

struct CaseMemo {
  bool eligible = false;             // static: top-level pops only, no run/alloc/unique
  std::vector<int32_t> live_in;      // registers read before the case writes them
  std::vector<int32_t> pop_dst;      // destination of each pop, in order
  std::vector<int32_t> restore;      // registers written that live_in or other code reads
  // the last recorded firing
  bool valid = false;
  // the firing leaves its live-in registers as it found them (so while no other code runs,
  // the next firing finds them equal to key_regs), and reg_epoch_ after it
  bool idempotent = false;
  uint64_t epoch = 0;
  std::vector<Value> key_regs, key_entries, result;  // live_in, popped entries, restore
  std::vector<double> delta;                          // op counts per class of one firing
};

// The static part of the memo of every case of `p`, by callback number (machine.cc order).
std::vector<CaseMemo> PlanCaseMemos(const Program& p);

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_CASE_MEMO_H_
