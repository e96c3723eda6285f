// The in-flight request set and the per-layer trace cursor of the timing core (timing_sim.h).
#ifndef EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_
#define EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace ember_emu {
namespace detail {

// Completion times of the requests in flight, as one multiset (the reference's heapq) split
// by where each request was served: the completions of one source (a cache level, DRAM)
// mostly arrive in increasing order (a level adds its fixed latency to issue times that
// mostly increase; the single-channel DRAM serialises its completions), so each source has a
// FIFO ring of the completions no earlier than its last one; a completion earlier than its
// ring's last (an issue time that went back) goes into a binary min-heap instead. The
// multiset is the union, so "remove every completion <= t", the size and "remove the
// minimum" are those of the reference (which of equal minimums leaves does not matter).
// A ring's slots are a power of two, its ends running counts; the slot after its last
// completion holds +inf, so an empty ring's front is +inf too (no emptiness checks). The
// heap's unused slots hold +inf (no bounds checks, branch-free choice of the smaller child).
class InFlight {
 public:
  static constexpr int kMaxRings = 10;
  // cap: completions in flight at most; rings: the sources (ring numbers 0 to rings - 1)
  InFlight(int64_t cap, int rings)
      : n_rings_(std::min(std::max(rings, 1), kMaxRings)), slots_(RingSlots(cap)),
        mask_(slots_ - 1), ring_(slots_ * (size_t)n_rings_, kInf),
        heap_((size_t)(2 * cap + 4), kInf) {
    for (int k = 0; k < n_rings_; ++k) rings_[k].slot = ring_.data() + (size_t)k * slots_;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  int64_t size() const { return n_; }
  double pop() {  // (not empty)
    int best = -1;
    double m = heap_[0];
    for (int k = 0; k < n_rings_; ++k) {
      const double f = rings_[k].slot[rings_[k].head & mask_];
      if (f < m) m = f, best = k;
    }
    --n_;
    lo_ = -kInf;  // (found again by the next PopThrough)
    if (best >= 0) {
      ++rings_[best].head;
      return m;
    }
    const double x = heap_[--n_heap_];
    heap_[n_heap_] = kInf;
    if (n_heap_) SiftDown(x);
    return m;
  }
  // Removes every completion <= t (the requests done by cycle t): those of each ring, then
  // those of the heap (the order does not matter: what is left is everything > t). Nothing
  // when t is below the earliest completion. R: the rings when known at compile time (0:
  // the constructor's).
  template <int R = 0>
  __attribute__((always_inline)) void PopThrough(double t) {
    if (t < lo_) return;  // (+inf when empty)
    const int rings = R ? R : n_rings_;
    const uint64_t mask = mask_;
    double lo = kInf;
    for (int k = 0; k < rings; ++k) {
      Ring& rg = rings_[k];
      const double* const r = rg.slot;
      uint64_t h = rg.head;
      double f = r[h & mask];
      if (f <= t) {
        const uint64_t h0 = h;
        do f = r[++h & mask]; while (f <= t);
        n_ -= (int64_t)(h - h0);
        rg.head = h;
      }
      lo = std::min(lo, f);
    }
    while (heap_[0] <= t) {  // +inf when empty
      const double x = heap_[--n_heap_];
      heap_[n_heap_] = kInf;
      --n_;
      if (n_heap_) SiftDown(x);
    }
    lo_ = std::min(lo, heap_[0]);
  }
  // A completion from source k (< rings); at most `cap` completions are in flight.
  __attribute__((always_inline)) void push(double x, int k) {
    ++n_;
    lo_ = std::min(lo_, x);
    Ring& rg = rings_[k];
    if (x >= rg.back) {
      const uint64_t tail = rg.tail, mask = mask_;
      rg.slot[tail & mask] = x;
      rg.slot[(tail + 1) & mask] = kInf;
      rg.tail = tail + 1;
      rg.back = x;
      return;
    }
    int64_t i = n_heap_++;
    double* h = heap_.data();
    while (i > 0) {
      const int64_t p = (i - 1) >> 1;
      if (h[p] <= x) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = x;
  }

 private:
  static constexpr double kInf = __builtin_inf();
  // slots for cap completions and the +inf after them: a power of two
  static size_t RingSlots(int64_t cap) {
    size_t n = 2;
    while (n < (size_t)cap + 1) n *= 2;
    return n;
  }
  void SiftDown(double x) {
    double* h = heap_.data();
    int64_t i = 0;
    for (;;) {
      const int64_t l = 2 * i + 1;
      const int64_t m = l + (h[l + 1] < h[l]);
      if (!(h[m] < x)) break;  // +inf past the end stops the walk
      h[i] = h[m];
      i = m;
    }
    h[i] = x;
  }
  const int n_rings_;
  const size_t slots_;
  const uint64_t mask_;
  std::vector<double> ring_;  // ring k: slots [k * slots_, (k + 1) * slots_)
  // One source's ring: what its push and its removal pass touch, together.
  struct Ring {
    double* slot = nullptr;       // its slots in ring_
    uint64_t head = 0, tail = 0;  // its completions: [head, tail)
    double back = -kInf;          // the last pushed
  };
  Ring rings_[kMaxRings];
  std::vector<double> heap_;
  int64_t n_heap_ = 0, n_ = 0;
  double lo_ = kInf;  // no completion is earlier (-inf: not known)
};

// The next load of one traversal layer: a cursor over the trace (no per-load copy). It counts
// the pushes it passes, so a queued load's data-queue entry is known without an index.
struct LayerCursor {
  int64_t value;          // the trace's layer number
  double agen = 0.0;      // address generation: cycle of the layer's next address
  int64_t pos = 0;        // event index of the layer's next load (n: none left)
  int64_t pushes = 0;     // PUSH events before pos
  int64_t left = 0;       // loads left
  int64_t dep = -1;       // the event index of the load pos depends on, or -1
  int64_t entry = -1;     // the data-queue entry of the load at pos, or -1 (none, never pushed)
  int64_t tail = 0, tail_pushes = 0;  // while indexing: the layer's last load so far, pushes before it
  // the last line prefetched for the layer's loads (a hint: any value works)
  int64_t prefetched = std::numeric_limits<int64_t>::min();
};

}  // namespace detail
}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_
