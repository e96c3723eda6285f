// The memory system of the timing core, identical in behaviour to ember_xla/emulator/memory.py:
// set-associative LRU cache levels (a hit makes the line most recent, a miss does not fill;
// fills go into the levels that missed) in front of one DRAM channel (latency + bandwidth).
//
// Each set is a flat array of `ways` tags kept as a ring in recency order (the most recent at
// the set's head, then on around the set, empty slots last): a lookup compares one contiguous
// run, a miss steps the head back onto the least recent slot and writes there (no tag moves),
// a hit moves only the tags more recent than it; no allocation and no pointers. A tag is the
// line number without its set bits, kept in 32 bits (a 16-way set is one 64-byte host line,
// compared with vector instructions) until a line needs more: the level then keeps whole line
// numbers in recency order from that access on.
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

// One set of narrow tags, a ring in recency order: the most recent at *head, then on around
// the set (empty slots last); true on a hit. A hit moves the tag to the front (the more
// recent ones move back one slot); a miss steps the head back one slot, onto the least
// recent tag (or an empty slot), and writes the new tag there: no tag moves. W: the ways
// when known at compile time (0: `ways`).
template <int W>
__attribute__((always_inline)) inline bool RotateSet(int32_t* p, uint8_t* head, int32_t tag,
                                                     uint32_t ways) {
  if (W) ways = (uint32_t)W;
  uint32_t h = *head, found;
#if defined(__SSE2__)
  if constexpr (W == 4 || W == 8 || W == 16) {
    // the set in W/4 vectors (16-byte aligned: the sets of W ways start at multiples of W)
    const __m128i t = _mm_set1_epi32(tag);
    auto eq = [&](int k) {
      return _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 4 * k)), t);
    };
    uint32_t mask;
    if constexpr (W == 4) {
      mask = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(eq(0)));
    } else if constexpr (W == 8) {
      const __m128i e = _mm_packs_epi32(eq(0), eq(1));
      mask = (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(e, e)) & 0xffu;
    } else {
      const __m128i lo = _mm_packs_epi32(eq(0), eq(1)), hi = _mm_packs_epi32(eq(2), eq(3));
      mask = (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(lo, hi));
    }
    if (!mask) {
      h = (h - 1) & (W - 1);
      *head = (uint8_t)h;
      p[h] = tag;
      return false;
    }
    found = (uint32_t)__builtin_ctz(mask);
  } else
#endif
  {
    if (p[h] == tag) return true;
    found = 0;
    while (found < ways && p[found] != tag) ++found;
    if (found == ways) {
      h = h ? h - 1 : ways - 1;
      *head = (uint8_t)h;
      p[h] = tag;
      return false;
    }
  }
  for (uint32_t i = found; i != h;) {
    const uint32_t j = i ? i - 1 : ways - 1;
    p[i] = p[j];
    i = j;
  }
  p[h] = tag;
  return true;
}

class CacheLevel {
 public:
  // wide_flag: set when this level (or any other level of the run) first keeps whole line
  // numbers, so the memory systems stop taking the narrow fast path (MemorySystem::Lookup).
  CacheLevel(const CacheSpec& s, bool* wide_flag)
      : sets_(s.sets), ways_(s.ways), latency_(s.latency),
        shift_((s.sets & (s.sets - 1)) == 0 ? __builtin_ctzll((uint64_t)s.sets) : -1),
        wide_flag_(wide_flag) {
    n_tags_ = (size_t)(s.sets * s.ways);
    if (ways_ > kMaxNarrowWays) {  // a head does not fit a byte: whole line numbers from the start
      wide_.assign(n_tags_, kEmpty64);
      *wide_flag_ = true;
      return;
    }
    narrow_.Assign(n_tags_, kEmpty32);
    heads_.Assign((size_t)s.sets, 0);
  }

  // Looks `line` up: true on a hit (the line becomes most recent); on a miss the line is
  // filled (it becomes most recent, the least recent line of a full set leaves). A miss
  // filling at once is what the levels that missed get in the end: no other access to this
  // level comes between a lookup and the fill of the levels that missed.
  __attribute__((noinline)) bool Access(int64_t line) {
    int64_t set, tag;
    Split(line, &set, &tag);
    if (wide_.empty()) {
      if (tag > kEmpty32 && tag <= std::numeric_limits<int32_t>::max())
        return RotateSet<0>(narrow_.data() + set * ways_, heads_.data() + set, (int32_t)tag,
                              (uint32_t)ways_);
      Widen();
    }
    int64_t* p = wide_.data() + set * ways_;
    int64_t w = 0;
    while (w < ways_ - 1 && p[w] != line) ++w;
    const bool hit = p[w] == line;
    for (int64_t v = w; v > 0; --v) p[v] = p[v - 1];
    p[0] = line;
    return hit;
  }
  int32_t* narrow_tags() { return narrow_.data(); }
  uint8_t* heads() { return heads_.data(); }
  int64_t sets() const { return sets_; }
  int64_t ways() const { return ways_; }
  int shift() const { return (int)shift_; }
  int64_t latency() const { return latency_; }
  bool pow2_sets() const { return shift_ >= 0; }
  // The lines whose tags are narrow in this level: [*lo, *hi].
  void NarrowLines(int64_t* lo, int64_t* hi) const {
    if (shift_ < 0) {
      *lo = 0, *hi = -1;
      return;
    }
    const __int128 l = (__int128)((int64_t)kEmpty32 + 1) * ((__int128)1 << shift_);
    const __int128 h = ((__int128)std::numeric_limits<int32_t>::max() + 1) * ((__int128)1 << shift_) - 1;
    const __int128 lmin = std::numeric_limits<int64_t>::min();
    const __int128 hmax = std::numeric_limits<int64_t>::max();
    *lo = (int64_t)(l < lmin ? lmin : l);
    *hi = (int64_t)(h > hmax ? hmax : h);
  }

 private:
  static constexpr int32_t kEmpty32 = std::numeric_limits<int32_t>::min();
  static constexpr int64_t kEmpty64 = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kMaxNarrowWays = 256;

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

  // From then on every set keeps whole line numbers in recency order (a tag outside the
  // narrow range came).
  void Widen() {
    wide_.assign(n_tags_, kEmpty64);
    for (int64_t s = 0; s < sets_; ++s) {
      const int64_t h = heads_[(size_t)s];
      for (int64_t r = 0; r < ways_; ++r) {
        const int32_t tag = narrow_[(size_t)(s * ways_ + (h + r) % ways_)];
        if (tag != kEmpty32) wide_[(size_t)(s * ways_ + r)] = (int64_t)tag * sets_ + s;
      }
    }
    *wide_flag_ = true;
  }

  int64_t sets_, ways_, latency_, shift_;
  bool* wide_flag_;
  // sets x ways narrow tags, each set a ring from its head (kEmpty32: empty); page aligned, so
  // a 16-way set is one host cache line; in the kept memory of trace columns (no fresh pages
  // per replay)
  ColumnArray<int32_t> narrow_;
  ColumnArray<uint8_t> heads_;   // per set: the slot of its most recent tag
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

  int64_t row_hits = 0;

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
    for (size_t i = n_private; i < t.levels.size(); ++i) levels.emplace_back(t.levels[i], &wide);
  }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  // some level of the run (a core's private one or a shared one) keeps whole line numbers
  bool wide = false;
  std::vector<CacheLevel> levels;
  Dram dram;
};

// One core's view of the memory system: its private levels, then the shared levels and DRAM
// (its own when `shared` is null, as for a single-core run; else the multi-core run's).
// Per-core hit/miss counts of every level and DRAM lines are kept here.
// Whether the template argument F names a narrow lookup (MemorySystem::NarrowLookupFn); its
// specialization for nullptr follows the class.
template <auto F>
struct IsNarrowFn {
  static constexpr bool value = true;
};

class MemorySystem {
 public:
  // What a narrow lookup needs of a level with power-of-two sets.
  struct NarrowLevel {
    int32_t* tags;
    uint8_t* heads;
    int64_t mask;  // sets - 1
    int shift;     // log2(sets)
    uint32_t ways;
  };
  template <int W>
  __attribute__((always_inline)) static bool AccessNarrow(const NarrowLevel& c, int64_t line) {
    const int64_t set = line & c.mask;
    const int32_t tag = (int32_t)(line >> c.shift);  // arithmetic: the floor, also below 0
    return RotateSet<W>(c.tags + set * (W ? W : (int64_t)c.ways), c.heads + set, tag, c.ways);
  }
  using NarrowLookupFn = int (*)(const NarrowLevel*, int64_t);
  // The lookup of levels of Ws... ways (0: any; at least one level).
  template <int... Ws>
  __attribute__((always_inline)) static int NarrowLookup(const NarrowLevel* c, int64_t line) {
    int k = 0;
    const bool hit = ((AccessNarrow<Ws>(c[k], line) || (++k, false)) || ...);
    return hit ? k : (int)sizeof...(Ws);
  }
  static int NarrowLookupAny(const NarrowLevel* c, int64_t line) {
    int k = 0;
    for (; c[k].ways; ++k)
      if (AccessNarrow<0>(c[k], line)) return k;
    return k;
  }
  explicit MemorySystem(const TimingTarget& t, SharedMemory* shared = nullptr,
                        size_t n_private = 0)
      : own_(shared ? nullptr : std::make_unique<SharedMemory>(t, 0)),
        shared_(shared ? shared : own_.get()),
        transfer_share_(shared_->dram.busy_per_line() / (double)shared_->dram.channels()) {
    const size_t n_own = shared ? n_private : 0;
    private_.reserve(n_own);
    for (size_t i = 0; i < n_own; ++i) private_.emplace_back(t.levels[i], &shared_->wide);
    for (CacheLevel& c : private_) level_[n_++] = &c;
    for (CacheLevel& c : shared_->levels) level_[n_++] = &c;
    for (int k = 0; k < n_; ++k) latency_[k] = (double)level_[k]->latency();
    // the lines every level looks up by mask and shift: [narrow_lo_, narrow_lo_ + narrow_span_]
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    bool all = true;  // every level has power-of-two sets and narrow tags
    for (int k = 0; k < n_; ++k) {
      int64_t l, h;
      level_[k]->NarrowLines(&l, &h);
      lo = std::max(lo, l), hi = std::min(hi, h);
      all = all && level_[k]->pow2_sets() && level_[k]->heads();
      narrow_[k] = NarrowLevel{level_[k]->narrow_tags(), level_[k]->heads(),
                               level_[k]->sets() - 1, level_[k]->shift(),
                               (uint32_t)level_[k]->ways()};
    }
    narrow_lo_ = lo;
    narrow_span_ = lo <= hi ? (uint64_t)hi - (uint64_t)lo : 0;
    narrow_lookup_ = all && lo <= hi ? PickNarrowLookup() : nullptr;
  }

  // Load one line at cycle t; returns the cycle its data is available. *where: the level that
  // had it (0 to levels - 1), `levels` for DRAM whose completions are increasing in request
  // order (the single-channel model serialises them), -1 for DRAM without that order.
  // F: the narrow lookup compiled in (narrow_lookup() or null: the one it points to).
  // kNarrow: NarrowRun holds for a run of lines that includes `line`.
  template <NarrowLookupFn F = nullptr, bool kNarrow = false>
  __attribute__((always_inline)) double Access(int64_t line, double t, int* where) {
    int k;
    if constexpr (kNarrow) {
      if constexpr (IsNarrowFn<F>::value) k = F(narrow_, line);
      else k = narrow_lookup_(narrow_, line);
    } else {
      k = Lookup<F>(line);
    }
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
  // Every line of [first, last] (first <= last) takes Lookup's narrow fast path: nothing an
  // access on that path does changes this, so it holds for the whole run.
  template <NarrowLookupFn F = nullptr>
  __attribute__((always_inline)) bool NarrowRun(int64_t first, int64_t last) const {
    return (IsNarrowFn<F>::value || narrow_lookup_) && !shared_->wide &&
           (uint64_t)first - (uint64_t)narrow_lo_ <= narrow_span_ &&
           (uint64_t)last - (uint64_t)narrow_lo_ <= narrow_span_;
  }
  int levels() const { return n_; }
  // Asks the host to bring the last level's sets of lines [first, last] into its caches (a
  // hint only: nothing the model sees changes; that level's tags, 2 MiB for the shipped
  // LLC, are what misses the host's caches). Only for the narrow lookup.
  __attribute__((always_inline)) void Prefetch(int64_t first, int64_t last) const {
    if (!narrow_lookup_) return;
    const NarrowLevel& c = narrow_[n_ - 1];
    for (int64_t line = first; line <= last; ++line)
      __builtin_prefetch(c.tags + (line & c.mask) * c.ways, 1, 3);
  }
  // The narrow lookup compiled for the levels (null: none; MemorySystem::Lookup).
  NarrowLookupFn narrow_lookup() const { return narrow_lookup_; }
  // Lookups that hit / missed level k (a lookup reaches a level when every level before it
  // missed).
  int64_t hits(int k) const { return hits_[k]; }
  int64_t misses(int k) const {
    int64_t reached = dram_lines;  // every lookup: a hit of some level, or a DRAM line
    for (int j = 0; j < n_; ++j) reached += hits_[j];
    for (int j = 0; j < k; ++j) reached -= hits_[j];
    return reached - hits_[k];
  }

  int64_t dram_lines = 0;
  double dram_busy = 0.0;  // this core's transfer cycles, per channel of the machine

 private:
  // The first level that has `line` (n_: none); every level looked up before it, and all
  // of them on a miss, are filled. When every level has power-of-two sets and narrow tags
  // and the line's tags are narrow in all of them (all but absurd addresses), the lookup
  // compiled for the levels' ways (NarrowLookup) looks each up by mask and shift; else each
  // level looks the line up in general.
  template <NarrowLookupFn F>
  __attribute__((always_inline)) int Lookup(int64_t line) {
    // (F non-null: F is narrow_lookup_)
    if ((IsNarrowFn<F>::value || narrow_lookup_) && !shared_->wide &&
        (uint64_t)line - (uint64_t)narrow_lo_ <= narrow_span_) {
      if constexpr (IsNarrowFn<F>::value) return F(narrow_, line);
      return narrow_lookup_(narrow_, line);
    }
    return LookupEach(line);
  }
  __attribute__((noinline)) int LookupEach(int64_t line) {
    for (int k = 0; k < n_; ++k)
      if (level_[k]->Access(line)) return k;
    return n_;
  }

  // The narrow lookup compiled for this target's levels: 1 to 3 levels of 4, 8 or 16 ways
  // each, else the one for any ways and levels.
  NarrowLookupFn PickNarrowLookup() const {
    auto code = [&](int k) -> int {
      const uint32_t w = narrow_[k].ways;
      return w == 4 ? 0 : w == 8 ? 1 : w == 16 ? 2 : -1;
    };
    int c[3] = {0, 0, 0};
    for (int k = 0; k < n_ && k < 3; ++k)
      if ((c[k] = code(k)) < 0) return NarrowLookupAny;
    static constexpr NarrowLookupFn one[3] = {NarrowLookup<4>, NarrowLookup<8>, NarrowLookup<16>};
#define EMBER_NL2(a) NarrowLookup<a, 4>, NarrowLookup<a, 8>, NarrowLookup<a, 16>
    static constexpr NarrowLookupFn two[9] = {EMBER_NL2(4), EMBER_NL2(8), EMBER_NL2(16)};
#undef EMBER_NL2
#define EMBER_NL3(a, b) NarrowLookup<a, b, 4>, NarrowLookup<a, b, 8>, NarrowLookup<a, b, 16>
#define EMBER_NL3A(a) EMBER_NL3(a, 4), EMBER_NL3(a, 8), EMBER_NL3(a, 16)
    static constexpr NarrowLookupFn three[27] = {EMBER_NL3A(4), EMBER_NL3A(8), EMBER_NL3A(16)};
#undef EMBER_NL3A
#undef EMBER_NL3
    switch (n_) {
      case 1: return one[c[0]];
      case 2: return two[3 * c[0] + c[1]];
      case 3: return three[9 * c[0] + 3 * c[1] + c[2]];
      default: return NarrowLookupAny;
    }
  }

  std::unique_ptr<SharedMemory> own_;
  SharedMemory* shared_;
  std::vector<CacheLevel> private_;
  CacheLevel* level_[kMaxLevels] = {};  // private levels, then shared ones
  double latency_[kMaxLevels] = {};
  int64_t hits_[kMaxLevels] = {};
  int n_ = 0;
  // Lookup's fast path: the levels (`ways` 0 after the last), the lookup compiled for
  // them (null when some level's sets are not a power of two), the lines it takes
  NarrowLevel narrow_[kMaxLevels + 1] = {};
  NarrowLookupFn narrow_lookup_ = nullptr;
  int64_t narrow_lo_ = 0;
  uint64_t narrow_span_ = 0;
  const double transfer_share_;  // this core's transfer cycles per DRAM line, per channel
};

// A narrow lookup function given as a template argument: nullptr's specialization says "none".
// (A trait, not `F != nullptr`: GCC under -fsanitize=undefined does not take the comparison of
// a function template's address with null as a constant expression.)
template <>
struct IsNarrowFn<MemorySystem::NarrowLookupFn{nullptr}> {
  static constexpr bool value = false;
};

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_CACHE_H_
