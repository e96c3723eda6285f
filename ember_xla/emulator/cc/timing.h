// The DAE timing model's fast core: replays a trace (ember_xla/emulator/trace.py) on a target
// with exactly the algorithm of the Python reference (ember_xla/emulator/timing.py), so both
// report the same cycles, stalls and traffic. Used by the C ABI (timing.cc) and directly by the
// program executor (no Python in the loop).
#ifndef EMBER_XLA_EMULATOR_NATIVE_TIMING_H_
#define EMBER_XLA_EMULATOR_NATIVE_TIMING_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace ember_emu {

enum EventKind : int8_t { kLoad = 0, kPush = 1, kToken = 2 };

struct CacheSpec {
  int64_t sets, ways, latency;
};

// The timing parameters of a target (what timing.py derives from target.Target).
struct TimingTarget {
  double agen_step = 1.0;      // cycles per cache-line address: 1 / (addresses_per_cycle*lanes)
  double dram_latency = 0.0;   // cycles
  double transfer = 1.0;       // cycles per line on the DRAM channel
  int64_t queue_bytes = 0;     // data queue: per-lane bytes x lanes
  int64_t outstanding = 1;     // memory requests in flight
  int64_t ctrl_cap = 1;        // control-queue entries
  int64_t line_bytes = 64;
  std::vector<CacheSpec> levels;
  // DRAM banks (cache.h: Dram); dram_banks == 0: one channel, no bank model.
  int64_t dram_channels = 1, dram_banks = 0, dram_row_lines = 1;
  double dram_row_hit = 0.0, dram_row_miss = 0.0;  // cycles
};

// A trace in flat arrays (the layout of trace.Trace), with the per-case cost.
struct TraceView {
  int64_t n = 0;
  const int8_t* kind = nullptr;
  const int64_t* a = nullptr;      // LOAD: address; PUSH: bytes; TOKEN: case id
  const int64_t* b = nullptr;      // LOAD: bytes
  const int64_t* c = nullptr;      // LOAD: event index of the load it depends on, or -1
  const int64_t* layer = nullptr;  // LOAD: access layer
  const uint8_t* queued = nullptr; // LOAD: its data goes into the next data-queue entry
  int64_t n_cases = 0;
  const double* case_cycles = nullptr;  // by case id
  const int64_t* case_pops = nullptr;   // by case id
};

// Memory of trace columns: anonymous mappings grown by mremap (pages move, nothing is copied,
// each page faults in once) with transparent huge pages where the kernel allows them; a freed
// column's mapping is kept for the next column of its element size (a few, up to 512
// MiB in all), whose pages are then mapped already. realloc where there is no mremap.
// *got_bytes: the capacity given (at least new_bytes).
void* GrowColumn(void* p, size_t old_bytes, size_t new_bytes, size_t elem, size_t* got_bytes);
void FreeColumn(void* p, size_t bytes, size_t elem);

// One column of a TraceBuffer: a plain array; its owner keeps the length and the capacity.
template <typename T>
class TraceColumn {
 public:
  TraceColumn() = default;
  TraceColumn(const TraceColumn&) = delete;
  TraceColumn& operator=(const TraceColumn&) = delete;
  TraceColumn(TraceColumn&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) {
    o.p_ = nullptr, o.n_ = 0, o.cap_ = 0;
  }
  ~TraceColumn() { FreeColumn(p_, cap_ * sizeof(T), sizeof(T)); }
  size_t size() const { return n_; }
  const T* data() const { return p_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  friend struct TraceBuffer;
  size_t Grow(size_t cap) {  // the capacity now (at least cap)
    size_t got = 0;
    p_ = static_cast<T*>(GrowColumn(p_, cap_ * sizeof(T), cap * sizeof(T), sizeof(T), &got));
    cap_ = got / sizeof(T);
    return cap_;
  }
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

// A fixed-length array in the memory of trace columns (GrowColumn: kept mappings reused; page
// aligned).
template <typename T>
class ColumnArray {
 public:
  ColumnArray() = default;
  ColumnArray(const ColumnArray&) = delete;
  ColumnArray& operator=(const ColumnArray&) = delete;
  ColumnArray(ColumnArray&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr, o.bytes_ = 0;
  }
  ~ColumnArray() { FreeColumn(p_, bytes_, sizeof(T)); }
  // n elements, each v
  void Assign(size_t n, T v) {
    Resize(n);
    std::fill(p_, p_ + n, v);
  }
  // room for n elements, their values unspecified (the caller writes each before reading it)
  void Resize(size_t n) {
    if (n * sizeof(T) > bytes_ || !p_) {
      FreeColumn(p_, bytes_, sizeof(T));
      p_ = nullptr, bytes_ = 0;
      p_ = static_cast<T*>(GrowColumn(nullptr, 0, std::max<size_t>(n * sizeof(T), 4096),
                                      sizeof(T), &bytes_));
    }
  }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* data() { return p_; }
  const T* data() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t bytes_ = 0;
};

// A growable trace (what the program executor records), viewable as a TraceView: columns of
// one length and capacity, an event appended with one capacity check.
struct TraceBuffer {
  TraceColumn<int8_t> kind;
  TraceColumn<int64_t> a, b, c, layer;
  TraceColumn<uint8_t> queued;
  int64_t Load(int64_t address, int64_t nbytes, int64_t dep, bool to_queue, int64_t lay) {
    Add(kLoad, address, nbytes, dep, lay, to_queue);
    return (int64_t)kind.n_ - 1;
  }
  void Push(int64_t nbytes) { Add(kPush, nbytes, 0, -1, -1, false); }
  void Token(int64_t case_id) { Add(kToken, case_id, 0, -1, -1, false); }
  void Clear() { kind.n_ = a.n_ = b.n_ = c.n_ = layer.n_ = queued.n_ = 0; }
  TraceView View(int64_t n_cases, const double* cycles, const int64_t* pops) const {
    return TraceView{(int64_t)kind.size(), kind.data(), a.data(), b.data(), c.data(),
                     layer.data(), queued.data(), n_cases, cycles, pops};
  }

 private:
  void Add(int8_t k, int64_t x, int64_t y, int64_t z, int64_t l, bool q) {
    const size_t i = kind.n_;
    if (i == cap_) Reserve(cap_ ? 2 * cap_ : 4096);
    // the column pointers read once (a byte store may alias anything: no reloads between)
    int8_t* const pk = kind.p_;
    int64_t* const pa = a.p_;
    int64_t* const pb = b.p_;
    int64_t* const pc = c.p_;
    int64_t* const pl = layer.p_;
    uint8_t* const pq = queued.p_;
    pa[i] = x, pb[i] = y, pc[i] = z, pl[i] = l;
    pk[i] = k, pq[i] = q ? 1 : 0;
    kind.n_ = a.n_ = b.n_ = c.n_ = layer.n_ = queued.n_ = i + 1;
  }
  void Reserve(size_t cap) {
    cap_ = std::min({kind.Grow(cap), a.Grow(cap), b.Grow(cap), c.Grow(cap), layer.Grow(cap),
                     queued.Grow(cap)});
  }
  size_t cap_ = 0;
};

constexpr int kMaxLevels = 8;

struct TimingResult {
  double cycles, access_busy, execute_busy, queue_full, queue_empty, dram_busy;
  int64_t dram_lines, tokens, entries, bytes_loaded;
  int64_t level_hits[kMaxLevels], level_misses[kMaxLevels];
};

// Replays `trace` on `target`. False (with a one-line reason in *err) when the program does not
// fit the target (an entry larger than the data queue, a deadlock, a callback popping data that
// is never pushed) or the trace is malformed.
bool Simulate(const TimingTarget& target, const TraceView& trace, TimingResult* out,
              std::string* err);

// Replays one trace per core together (cores.cc): each core has its access unit, queues,
// execute unit and the first `n_private` cache levels; the other levels and DRAM are shared,
// and the cores' requests reach them in global time order. out[k]: core k's result (its cycles
// from time 0; hits and misses of every level as its requests saw them). One core gives
// exactly Simulate's result. marks[k] (optional): callback counts of core k at which to note
// the cycle its execute unit is free (the end of a piece); mark_times[k] gets them.
bool SimulateCores(const TimingTarget& target, size_t n_private,
                   const std::vector<TraceView>& traces, std::vector<TimingResult>* out,
                   std::string* err, const std::vector<std::vector<int64_t>>* marks = nullptr,
                   std::vector<std::vector<double>>* mark_times = nullptr);

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_TIMING_H_
