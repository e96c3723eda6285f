// The memory system of the timing core, identical in behaviour to ember_xla/emulator/memory.py:
// set-associative LRU cache levels (a hit makes the line most recent, a miss does not fill;
// fills go into the levels that missed) in front of one DRAM channel (latency + bandwidth).
//
// Each set is a flat array of `ways` tags in recency order (most recent first, empty slots at
// the end), so a lookup scans one contiguous run and an LRU update is a short move, with no
// allocation and no pointers. A tag is the line number without its set bits, kept in 32 bits
// (a 16-way set is one 64-byte host line, compared and moved with vector instructions) until a
// line needs more: the level then keeps whole line numbers from that access on.
#ifndef EMBER_XLA_EMULATOR_NATIVE_CACHE_H_
#define EMBER_XLA_EMULATOR_NATIVE_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
  explicit CacheLevel(const CacheSpec& s)
      : sets_(s.sets), ways_(s.ways), latency_(s.latency),
        shift_((s.sets & (s.sets - 1)) == 0 ? __builtin_ctzll((uint64_t)s.sets) : -1) {
    n_tags_ = (size_t)(s.sets * s.ways);
    narrow_.Assign(n_tags_, kEmpty32);
  }

  // Looks `line` up: true on a hit (the line becomes most recent); on a miss the line is
  // filled (it becomes most recent, the least recent line of a full set leaves). A miss
  // filling at once is what the levels that missed get in the end: no other access to this
  // level comes between a lookup and the fill of the levels that missed.
  __attribute__((always_inline)) bool Access(int64_t line) {
    if (fast_) {  // power-of-two sets, narrow tags: the set and tag by mask and shift
      const int64_t tag = line >> shift_;  // arithmetic: the floor, also for negative lines
      // kEmpty32 < tag <= INT32_MAX, in one unsigned comparison
      if ((uint64_t)tag - (uint64_t)(int64_t)kEmpty32 - 1 < (uint64_t)0xffffffffu) {
        int32_t* p = narrow_.data() + (line & (sets_ - 1)) * ways_;
        switch (ways_) {
          case 4: return MoveToFront<4>(p, (int32_t)tag);
          case 8: return MoveToFront<8>(p, (int32_t)tag);
          case 16: return MoveToFront<16>(p, (int32_t)tag);
          default: return MoveToFront<0>(p, (int32_t)tag);
        }
      }
    }
    return AccessSlow(line);
  }
  int64_t latency() const { return latency_; }
 private:
  static constexpr int32_t kEmpty32 = std::numeric_limits<int32_t>::min();

  // Access when the sets are not a power of two or a tag needs (or needed) 64 bits.
  __attribute__((noinline)) bool AccessSlow(int64_t line) {
    int64_t set, tag;
    Split(line, &set, &tag);
    if (wide_.empty()) {
      if (tag > kEmpty32 && tag <= std::numeric_limits<int32_t>::max())
        return MoveToFront<0>(narrow_.data() + set * ways_, (int32_t)tag);
      Widen();
      fast_ = false;
    }
    int64_t* p = wide_.data() + set * ways_;
    int64_t w = 0;
    while (w < ways_ - 1 && p[w] != line) ++w;
    const bool hit = p[w] == line;
    for (int64_t v = w; v > 0; --v) p[v] = p[v - 1];
    p[0] = line;
    return hit;
  }
  static constexpr int64_t kEmpty64 = std::numeric_limits<int64_t>::min();

  // A line is its set and its tag (the line divided by the number of sets, floored): the tag
  // alone identifies it within its set.
  void Split(int64_t line, int64_t* set, int64_t* tag) const {
    if (shift_ >= 0) {
      *set = line & (sets_ - 1);
      *tag = line >> shift_;  // arithmetic: the floor, also for negative lines
    } else {
      *set = FloorMod(line, sets_);
      *tag = FloorDiv(line, sets_);
    }
  }

  // One set of narrow tags in recency order (most recent first, empty slots at the end):
  // true on a hit; the tag is moved (hit) or inserted (miss) to the front. W: the ways when
  // known at compile time (0: ways_).
  template <int W>
  bool MoveToFront(int32_t* p, int32_t tag) const {
    if (p[0] == tag) return true;
#if defined(__SSE2__)
    if constexpr (W >= 4 && W % 4 == 0) {
      // the set in W/4 vectors (16-byte aligned: the sets of W ways start at multiples of W)
      __m128i v[W / 4];
      const __m128i t = _mm_set1_epi32(tag);
      uint32_t mask = 0;
      for (int k = 0; k < W / 4; ++k) {
        v[k] = _mm_load_si128(reinterpret_cast<const __m128i*>(p + 4 * k));
        mask |= (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(v[k], t))) << 4 * k;
      }
      if (mask) {
        for (int w = __builtin_ctz(mask); w > 0; --w) p[w] = p[w - 1];
        p[0] = tag;
        return true;
      }
      // a miss: every tag moves back one way (the last leaves), the new one comes first
      __m128i carry = _mm_cvtsi32_si128(tag);
      for (int k = 0; k < W / 4; ++k) {
        const __m128i moved = _mm_or_si128(_mm_slli_si128(v[k], 4), carry);
        carry = _mm_srli_si128(v[k], 12);
        _mm_store_si128(reinterpret_cast<__m128i*>(p + 4 * k), moved);
      }
      return false;
    }
#endif
    const int64_t ways = W ? W : ways_;
    int64_t w = 1;
    while (w < ways && p[w] != tag) ++w;
    const bool hit = w < ways;
    if (!hit) w = ways - 1;
    for (; w > 0; --w) p[w] = p[w - 1];
    p[0] = tag;
    return hit;
  }
  // From then on every set keeps whole line numbers (a tag outside the narrow range came).
  void Widen() {
    wide_.assign(n_tags_, kEmpty64);
    for (int64_t s = 0; s < sets_; ++s)
      for (int64_t w = 0; w < ways_; ++w) {
        const int32_t tag = narrow_[(size_t)(s * ways_ + w)];
        if (tag != kEmpty32) wide_[(size_t)(s * ways_ + w)] = (int64_t)tag * sets_ + s;
      }
  }

  int64_t sets_, ways_, latency_, shift_;
  bool fast_ = shift_ >= 0;  // power-of-two sets and tags still narrow (Access's fast path)
  // sets x ways tags, most recent first (kEmpty32: empty); page aligned, so a 16-way set is
  // one host cache line; in the kept memory of trace columns (no fresh pages per replay)
  ColumnArray<int32_t> narrow_;
  size_t n_tags_ = 0;
  std::vector<int64_t> wide_;    // once widened: sets x ways line numbers, most recent first
};

// The DRAM behind the caches. Without a bank model (banks == 0): one channel, a load-to-use
// latency and a bandwidth every request shares (completions then arrive in request order).
// With banks: lines interleave in row-sized chunks over channels then banks; a bank holds one
// open row: a request to it waits for the bank's next command slot, its data is ready row_hit
// (open row) or row_miss (precharge + activate + column) cycles later, then crosses its channel
// (transfer cycles, in turn) and takes the load-to-use latency; the bank takes its next command
// one burst (transfer) after a column command, and only once the row is open after a miss.
class Dram {
 public:
  explicit Dram(const TimingTarget& t)
      : latency_(t.dram_latency), transfer_(t.transfer), channels_(t.dram_channels),
        banks_(t.dram_banks), row_lines_(t.dram_row_lines), row_hit_(t.dram_row_hit),
        row_miss_(t.dram_row_miss), chan_free_((size_t)std::max<int64_t>(t.dram_channels, 1), 0.0),
        bank_free_((size_t)std::max<int64_t>(t.dram_channels * t.dram_banks, 1), 0.0),
        open_row_((size_t)std::max<int64_t>(t.dram_channels * t.dram_banks, 1), kNoRow) {}

  // Completion cycle of a line requested at t; *ordered: completions so far are increasing
  // in request order (the single-channel model), so the caller may keep them in a FIFO.
  double Access(int64_t line, double t, bool* ordered) {
    ++lines;
    busy += transfer_;
    if (banks_ <= 0) {
      const double start = std::max(t, chan_free_[0]);
      chan_free_[0] = start + transfer_;
      *ordered = true;
      return start + transfer_ + latency_;
    }
    *ordered = false;
    int64_t rest = FloorDiv(line, row_lines_);
    const int64_t ch = FloorMod(rest, channels_);
    rest = FloorDiv(rest, channels_);
    const int64_t bank = ch * banks_ + FloorMod(rest, banks_);
    const int64_t row = FloorDiv(rest, banks_);
    const double cmd = std::max(t, bank_free_[bank]);
    const bool hit = open_row_[bank] == row;
    row_hits += hit;
    open_row_[bank] = row;
    // the row is open (row_miss - row_hit) after a miss's command; column commands to an open
    // row follow each other one burst (transfer) apart while their data is on its way
    bank_free_[bank] = cmd + (hit ? 0.0 : row_miss_ - row_hit_) + transfer_;
    const double bus = std::max(cmd + (hit ? row_hit_ : row_miss_), chan_free_[ch]);
    chan_free_[ch] = bus + transfer_;
    return bus + transfer_ + latency_;
  }
  int64_t channels() const { return std::max<int64_t>(channels_, 1); }
  double busy_per_line() const { return transfer_; }

  int64_t lines = 0, row_hits = 0;
  double busy = 0.0;  // channel-cycles of transfer (all channels together)

 private:
  static constexpr int64_t kNoRow = std::numeric_limits<int64_t>::min();
  double latency_, transfer_;
  int64_t channels_, banks_, row_lines_;
  double row_hit_, row_miss_;
  std::vector<double> chan_free_, bank_free_;
  std::vector<int64_t> open_row_;
};

// The levels every core shares (the last `levels.size() - n_private` of the target) and DRAM:
// one object that the memory systems of all cores of a multi-core run point to.
class SharedMemory {
 public:
  SharedMemory(const TimingTarget& t, size_t n_private) : dram(t) {
    levels.reserve(t.levels.size() - n_private);
    for (size_t i = n_private; i < t.levels.size(); ++i) levels.emplace_back(t.levels[i]);
  }
  std::vector<CacheLevel> levels;
  Dram dram;
};

// One core's view of the memory system: its private levels, then the shared levels and DRAM
// (its own when `shared` is null, as for a single-core run; else the multi-core run's).
// Per-core hit/miss counts of every level and DRAM lines are kept here.
class MemorySystem {
 public:
  explicit MemorySystem(const TimingTarget& t, SharedMemory* shared = nullptr,
                        size_t n_private = 0)
      : own_(shared ? nullptr : std::make_unique<SharedMemory>(t, 0)),
        shared_(shared ? shared : own_.get()),
        transfer_share_(shared_->dram.busy_per_line() / (double)shared_->dram.channels()) {
    const size_t n_own = shared ? n_private : 0;
    private_.reserve(n_own);
    for (size_t i = 0; i < n_own; ++i) private_.emplace_back(t.levels[i]);
    for (CacheLevel& c : private_) level_[n_++] = &c;
    for (CacheLevel& c : shared_->levels) level_[n_++] = &c;
    for (int k = 0; k < n_; ++k) latency_[k] = (double)level_[k]->latency();
  }

  // Load one line at cycle t; returns the cycle its data is available. *where: the level that
  // had it (0 to levels - 1), `levels` for DRAM whose completions are increasing in request
  // order (the single-channel model serialises them), -1 for DRAM without that order.
  double Access(int64_t line, double t, int* where) {
    ++accesses_;
    const int k = Lookup(line);
    if (k < n_) {
      ++hits_[k];
      *where = k;
      return t + latency_[k];
    }
    bool ordered;
    const double done = shared_->dram.Access(line, t, &ordered);
    *where = ordered ? n_ : -1;
    ++dram_lines;
    dram_busy += transfer_share_;
    return done;
  }
  int levels() const { return n_; }
  // Lookups that hit / missed level k (a lookup reaches a level when every level before it
  // missed).
  int64_t hits(int k) const { return hits_[k]; }
  int64_t misses(int k) const {
    int64_t reached = accesses_;
    for (int j = 0; j < k; ++j) reached -= hits_[j];
    return reached - hits_[k];
  }

  int64_t dram_lines = 0;
  double dram_busy = 0.0;  // this core's transfer cycles, per channel of the machine

 private:
  // The first level that has `line` (n_: none); every level looked up before it, and all
  // of them on a miss, are filled. The first three levels each have their own copy of the
  // lookup, so the branch on a level's ways is always taken the same way where it is.
  int Lookup(int64_t line) {
    if (n_ > 0 && level_[0]->Access(line)) return 0;
    if (n_ > 1 && level_[1]->Access(line)) return 1;
    if (n_ > 2 && level_[2]->Access(line)) return 2;
    for (int k = 3; k < n_; ++k)
      if (level_[k]->Access(line)) return k;
    return n_;
  }

  std::unique_ptr<SharedMemory> own_;
  SharedMemory* shared_;
  std::vector<CacheLevel> private_;
  CacheLevel* level_[kMaxLevels] = {};  // private levels, then shared ones
  double latency_[kMaxLevels] = {};
  int64_t hits_[kMaxLevels] = {};
  int64_t accesses_ = 0;
  int n_ = 0;
  const double transfer_share_;  // this core's transfer cycles per DRAM line, per channel
};

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_CACHE_H_
