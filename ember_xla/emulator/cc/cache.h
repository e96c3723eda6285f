// The memory system of the timing core, identical in behaviour to ember_xla/emulator/memory.py:
// set-associative LRU cache levels (a hit makes the line most recent, a miss does not fill;
// fills go into the levels that missed) in front of one DRAM channel (latency + bandwidth).
//
// Each set is a flat array of `ways` line numbers in recency order (most recent first, empty
// slots at the end), so a lookup scans one contiguous run and an LRU update is a short move —
// no allocation, no pointers.
#ifndef EMBER_XLA_EMULATOR_NATIVE_CACHE_H_
#define EMBER_XLA_EMULATOR_NATIVE_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "timing.h"

namespace ember_emu {

// Python's floor division and modulo (addresses and line numbers may be negative).
inline int64_t FloorDiv(int64_t x, int64_t d) {
  int64_t q = x / d;
  return (x % d != 0 && ((x < 0) != (d < 0))) ? q - 1 : q;
}
inline int64_t FloorMod(int64_t x, int64_t d) {
  int64_t r = x % d;
  return (r != 0 && ((r < 0) != (d < 0))) ? r + d : r;
}

class CacheLevel {
 public:
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();

  explicit CacheLevel(const CacheSpec& s)
      : sets_(s.sets), ways_(s.ways), latency_(s.latency),
        mask_((s.sets & (s.sets - 1)) == 0 ? s.sets - 1 : -1),
        tags_((size_t)(s.sets * s.ways), kEmpty) {}

  // True on a hit (the line becomes most recent).
  bool Lookup(int64_t line) {
    int64_t* set = Set(line);
    for (int64_t w = 0; w < ways_; ++w) {
      if (set[w] == line) {
        for (int64_t v = w; v > 0; --v) set[v] = set[v - 1];
        set[0] = line;
        ++hits;
        return true;
      }
    }
    ++misses;
    return false;
  }
  // Insert a line that missed: it becomes most recent, the least recent one (if full) leaves.
  void Fill(int64_t line) {
    int64_t* set = Set(line);
    for (int64_t v = ways_ - 1; v > 0; --v) set[v] = set[v - 1];
    set[0] = line;
  }
  int64_t latency() const { return latency_; }
  // Hint the host cache to fetch the set of `line` (the emulated cache's state, not data).
  void Prefetch(int64_t line) const {
    const int64_t* set = tags_.data() + SetIndex(line) * ways_;
    __builtin_prefetch(set);
    if (ways_ > 8) __builtin_prefetch(set + 8);
  }

  int64_t hits = 0, misses = 0;

 private:
  int64_t SetIndex(int64_t line) const {
    return mask_ >= 0 ? (line & mask_) : FloorMod(line, sets_);
  }
  int64_t* Set(int64_t line) { return tags_.data() + SetIndex(line) * ways_; }
  int64_t sets_, ways_, latency_, mask_;
  std::vector<int64_t> tags_;
};

class MemorySystem {
 public:
  explicit MemorySystem(const TimingTarget& t)
      : dram_latency_(t.dram_latency), transfer_(t.transfer) {
    levels_.reserve(t.levels.size());
    for (const CacheSpec& s : t.levels) levels_.emplace_back(s);
  }

  // Load one line at cycle t; returns the cycle its data is available.
  // *dram: it went to DRAM (such completions are increasing: the channel serialises them).
  double Access(int64_t line, double t, bool* dram) {
    const size_t n = levels_.size();
    for (size_t i = 0; i < n; ++i) {
      if (levels_[i].Lookup(line)) {
        for (size_t u = 0; u < i; ++u) levels_[u].Fill(line);
        *dram = false;
        return t + (double)levels_[i].latency();
      }
    }
    *dram = true;
    for (CacheLevel& lv : levels_) lv.Fill(line);
    const double start = std::max(t, dram_free_);
    dram_free_ = start + transfer_;
    ++dram_lines;
    dram_busy += transfer_;
    return start + transfer_ + dram_latency_;
  }
  const std::vector<CacheLevel>& levels() const { return levels_; }
  void Prefetch(int64_t line) const {
    for (size_t i = 1; i < levels_.size(); ++i) levels_[i].Prefetch(line);
  }

  int64_t dram_lines = 0;
  double dram_busy = 0.0;

 private:
  std::vector<CacheLevel> levels_;
  double dram_latency_, transfer_;
  double dram_free_ = 0.0;
};

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_CACHE_H_
