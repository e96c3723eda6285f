// The in-flight request set and the per-layer trace cursor of the timing core (timing_sim.h).
#ifndef EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_
#define EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ember_emu {
namespace detail {

// Completion times of the requests in flight, as one multiset (the reference's heapq) split in
// two: DRAM completions arrive in increasing order (the channel serialises them), so they wait
// in a FIFO ring; cache hits go into a binary min-heap whose unused slots hold +inf (no bounds
// checks, branch-free choice of the smaller child). The minimum is the smaller of both fronts.
// The ring's slots are a power of two, its ends running counts; the slot after its last
// completion holds +inf, so an empty ring's front is +inf too (no emptiness checks).
class InFlight {
 public:
  explicit InFlight(int64_t cap)
      : ring_(RingSlots(cap), kInf), mask_(ring_.size() - 1), heap_((size_t)(2 * cap + 4), kInf) {}
  int64_t size() const { return (int64_t)(tail_ - head_) + n_heap_; }
  double pop() {  // (not empty)
    const double r = ring_[head_ & mask_];
    if (r <= heap_[0]) {  // (+inf: the ring is empty, the heap is not)
      ++head_;
      return r;
    }
    const double top = heap_[0];
    const double x = heap_[--n_heap_];
    heap_[n_heap_] = kInf;
    if (n_heap_) SiftDown(x);
    return top;
  }
  // Removes every completion <= t (the requests done by cycle t): those of the ring, then
  // those of the heap (the order does not matter: what is left is everything > t).
  void PopThrough(double t) {
    while (ring_[head_ & mask_] <= t) ++head_;  // +inf after the last
    while (heap_[0] <= t) {  // +inf when empty
      const double x = heap_[--n_heap_];
      heap_[n_heap_] = kInf;
      if (n_heap_) SiftDown(x);
    }
  }
  // A completion no earlier than every DRAM completion pushed before (monotone); at most
  // `cap` completions are in flight.
  void push_ordered(double x) {
    ring_[tail_ & mask_] = x;
    ++tail_;
    ring_[tail_ & mask_] = kInf;
  }
  void push(double x) {
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
  std::vector<double> ring_;
  uint64_t mask_, head_ = 0, tail_ = 0;  // ring: completions [head_, tail_), slots by mask
  std::vector<double> heap_;
  int64_t n_heap_ = 0;
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
};

}  // namespace detail
}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_INFLIGHT_H_
