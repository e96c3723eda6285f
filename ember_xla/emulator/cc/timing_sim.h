// The timing core's replay machinery (shared by timing.cc: Simulate, and cores.cc:
// SimulateCores): the in-flight request set, the per-layer cursors and the simulation of one
// DAE core over its trace, steppable load by load. Internal to the emulator library.
#ifndef EMBER_XLA_EMULATOR_NATIVE_TIMING_SIM_H_
#define EMBER_XLA_EMULATOR_NATIVE_TIMING_SIM_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cache.h"
#include "inflight.h"
#include "timing.h"

namespace ember_emu {
namespace detail {

class Sim {
 public:
  Sim(const TimingTarget& t, const TraceView& tr, std::string* err,
      SharedMemory* shared = nullptr, size_t n_private = 0)
      : t_(t), tr_(tr), err_(err), mem_(t, shared, n_private),
        heap_(std::max<int64_t>(t.outstanding, 1), mem_.levels() + 1),
        line_shift_(t.line_bytes > 0 && (t.line_bytes & (t.line_bytes - 1)) == 0
                        ? __builtin_ctzll((uint64_t)t.line_bytes) : -1) {}

  bool Run(TimingResult* out) {
    if (!Index()) return false;
    if (!Replay()) return false;
    Report(out);
    return true;
  }

  // Stepping (the multi-core driver): Index once, then Next/IssueNext until Next returns 0,
  // then Drain and Report. Next: 1 with the cycle of the load the access unit issues next,
  // 0 when every load is issued, -1 on failure (reason in *err).
  bool Start() { return Index(); }
  // Token counts at which to note the execute unit's time (a core's piece boundaries).
  void SetMarks(const std::vector<int64_t>* marks) { marks_ = marks; }
  const std::vector<double>& mark_times() const { return mark_times_; }
  int Next(double* t) {
    bool any = false;
    if (!PickNext(&any)) return -1;
    if (!any) return 0;
    *t = pick_t_;
    return 1;
  }
  void IssueNext() { Issue(layers_[pick_], pick_t_, pick_wait_); }
  bool Drain() { return Tail(); }
  void Report(TimingResult* out) {
    *out = TimingResult{};
    out->cycles = std::max({exec_free_, max_done_, max_tok_time_, 0.0});
    out->access_busy = access_busy_;
    out->execute_busy = exec_busy_;
    out->queue_full = queue_full_;
    out->queue_empty = queue_empty_;
    out->dram_busy = mem_.dram_busy;
    out->dram_lines = mem_.dram_lines;
    out->tokens = n_tok_;
    out->entries = n_entries_;
    out->bytes_loaded = bytes_loaded_;
    for (int i = 0; i < mem_.levels() && i < kMaxLevels; ++i) {
      out->level_hits[i] = mem_.hits(i);
      out->level_misses[i] = mem_.misses(i);
    }
  }

 private:
  bool Fail(const std::string& msg) {
    *err_ = msg;
    return false;
  }

  // -- structure of the trace (timing.py: _Sim._index), one pass ---------------------------------
  bool Index() {
    // room for an entry per event (only the pages of the entries written are touched)
    entries_.Resize((size_t)tr_.n);  // each written below
    // a load's and a token's written below (a link, or -1: not issued); only those are read
    slot_.Resize((size_t)tr_.n);
    linked_ = tr_.n < kMaxLinked;
    return linked_ ? IndexWith<true>() : IndexWith<false>();
  }
  template <bool kLinked>
  bool IndexWith() {
    const int64_t n = tr_.n;
    int64_t n_tok = 0;
    int64_t e = 0, pending = 0;
    int64_t last_tok = -1, last_tok_pushes = 0;  // the last token so far, pushes before it
    // the cursor of each small layer number (-1: none yet); other numbers are searched
    int32_t slot_of[kDirectLayers];
    std::fill(slot_of, slot_of + kDirectLayers, -1);
    // the columns and arrays read once (the stores below may alias anything for the compiler)
    const int8_t* const kind = tr_.kind;
    const int64_t *const a = tr_.a, *const c = tr_.c, *const lay = tr_.layer;
    const uint8_t* const queued = tr_.queued;
    constexpr bool linked = kLinked;
    uint64_t* const slot = slot_.data();
    Entry* const entries = entries_.data();
    const int64_t queue_bytes = t_.queue_bytes;
    for (int64_t i = 0; i < n; ++i) {
      const int8_t k = kind[i];
      if (k == kLoad) {
        const int64_t dep = c[i];
        const uint64_t after = (uint64_t)dep + 1;  // 0: none; above i: dep >= i or dep < -1
        if (after > (uint64_t)i || (after && kind[dep] != kLoad))
          return Fail("malformed trace: load " + std::to_string(i) + " depends on event " +
                      std::to_string(dep) + ", not an earlier load");
        const int64_t v = lay[i];
        int64_t sl = (uint64_t)v < (uint64_t)kDirectLayers ? slot_of[v] : LayerSlot(v);
        if (sl < 0) {  // a new layer
          sl = (int64_t)layers_.size();
          layers_.push_back(LayerCursor{v, 0.0, i, e, 0});
          if ((uint64_t)v < (uint64_t)kDirectLayers) slot_of[v] = (int32_t)sl;
        }
        LayerCursor& lc = layers_[(size_t)sl];
        if (!linked) slot[i] = kNotIssued;
        else if (lc.left) slot[lc.tail] = PackLink(i - lc.tail, e - lc.tail_pushes);
        lc.tail = i, lc.tail_pushes = e;
        ++lc.left;
        pending += queued[i] != 0;
      } else if (k == kPush) {
        // an entry without loads counts as one pending "load": its reservation pushes it
        if (pending > std::numeric_limits<int32_t>::max())
          return Fail("a data-queue entry is made of more than 2^31 loads");
        const int64_t bytes = a[i];
        if (bytes > queue_bytes)
          return Fail("a data-queue entry of " + std::to_string(bytes) +
                      " bytes does not fit the " + std::to_string(queue_bytes) +
                      "-byte data queue");
        Entry& en = entries[e];
        en = Entry{};
        en.remaining = pending ? (int32_t)pending : 1;
        en.loadless = pending == 0;
        en.bytes = bytes;
        pending = 0;
        ++e;
      } else if (k == kToken) {
        const int64_t cs = a[i];
        if (cs < 0 || cs >= tr_.n_cases || tr_.case_pops[cs] < 0)
          return Fail("control token " + std::to_string(cs) + " has no case cost");
        if (linked && last_tok >= 0) slot[last_tok] = PackLink(i - last_tok, e - last_tok_pushes);
        last_tok = i, last_tok_pushes = e;
        ++n_tok;
      } else {
        return Fail("malformed trace: event " + std::to_string(i) + " has kind " +
                    std::to_string((int)k));
      }
    }
    if (linked_) {
      if (last_tok >= 0) slot_[last_tok] = PackLink(0, 0);  // the last token: no next one
      for (const LayerCursor& lc : layers_) slot_[lc.tail] = kNotIssued;  // a layer's last load
    }
    n_entries_ = e;
    n_tok_ = n_tok;
    for (LayerCursor& lc : layers_) Fetch(lc);
    ring_.assign((size_t)std::min<int64_t>(t_.ctrl_cap, n_tok + 1), 0.0);
    tok_pos_ = 0;
    AdvanceToken();
    layers_left_ = (int64_t)layers_.size();
    return true;
  }

  // The cursor of layer number v among layers_ (-1: none yet).
  __attribute__((noinline)) int64_t LayerSlot(int64_t v) const {
    for (size_t s = 0; s < layers_.size(); ++s)
      if (layers_[s].value == v) return (int64_t)s;
    return -1;
  }
  static constexpr int64_t kDirectLayers = 16;  // layer numbers 0 to 15 found without a search
  // How far on in the trace a layer's move prefetches: 3 rows of a bag trace of row loads,
  // 1-2 rows of one of 8 chunk loads per row (of 8 to 32 events measured, the one that
  // serves both)
  static constexpr int64_t kPrefetchAhead = 12;

  // Moves the token cursor to the next TOKEN event at or after tok_pos_.
  void AdvanceToken() {
    while (tok_pos_ < tr_.n && tr_.kind[tok_pos_] != kToken) {
      tok_pushes_ += tr_.kind[tok_pos_] == kPush;
      ++tok_pos_;
    }
  }
  // What the pick needs of a cursor's load: its dependency and its entry.
  void Fetch(LayerCursor& lc) const {
    lc.dep = tr_.c[lc.pos];
    lc.entry = (tr_.queued[lc.pos] && lc.pushes < n_entries_) ? lc.pushes : -1;
  }
  // Moves a layer cursor past its issued load to the layer's next load.
  void AdvanceLayer(LayerCursor& lc) {
    if (--lc.left == 0) {
      --layers_left_;
      return;
    }
    if (linked_) {
      const Link k = LinkAt(lc.pos);
      lc.pos += k.delta;
      lc.pushes += k.pushes;
      Fetch(lc);
      const int64_t ahead = lc.pos + kPrefetchAhead;
      if (lc.entry >= 0 && ahead < tr_.n && line_shift_ >= 0 && tr_.kind[ahead] == kLoad &&
          tr_.queued[ahead]) {
        // a layer of data loads: the last level's sets of the data load kPrefetchAhead events
        // on (from its second line when this layer's last prefetch ended on its first)
        const int64_t addr = tr_.a[ahead];
        const int64_t last = (addr + std::max<int64_t>(tr_.b[ahead], 1) - 1) >> line_shift_;
        const int64_t first = (addr >> line_shift_) + ((addr >> line_shift_) == lc.prefetched);
        if (first <= last) {
          mem_.Prefetch(first, last);
          lc.prefetched = last;
        }
      }
      return;
    }
    int64_t pos = lc.pos + 1;
    int64_t pushes = lc.pushes;
    while (!(tr_.kind[pos] == kLoad && tr_.layer[pos] == lc.value)) {
      pushes += tr_.kind[pos] == kPush;
      ++pos;
    }
    lc.pos = pos;
    lc.pushes = pushes;
    Fetch(lc);
  }
  // The cache line of a byte address (floored, also below address 0).
  int64_t LineOf(int64_t addr) const {
    return line_shift_ >= 0 ? addr >> line_shift_ : FloorDiv(addr, t_.line_bytes);
  }

  // -- execute unit ------------------------------------------------------------------------------
  // Runs the next callback if its inputs are known; false when blocked, done or failed (fatal_).
  bool ExecNext() {
    const int64_t k = n_started_;
    if (k >= n_tok_) return false;
    const int64_t before = tok_pushes_;
    double t_tok = last_tok_time_;
    if (before) {
      if (entries_[before - 1].remaining > 0) return false;
      t_tok = std::max(t_tok, entries_[before - 1].push);
    }
    double& ring = ring_[ring_pos_];  // tok_start[k - ctrl_cap]
    if (k >= t_.ctrl_cap) t_tok = std::max(t_tok, ring);
    const int64_t cs = tr_.a[tok_pos_];
    const int64_t pops = tr_.case_pops[cs];
    const int64_t n_e = n_entries_;
    double ready = t_tok;
    for (int64_t e = data_ptr_; e < data_ptr_ + pops; ++e) {
      if (e >= n_e) return FailPops(cs);
      if (entries_[e].remaining > 0) return false;
      ready = std::max(ready, entries_[e].push);
    }
    const double start = std::max(exec_free_, ready);
    if (ready > exec_free_) queue_empty_ += ready - exec_free_;
    const double cost = tr_.case_cycles[cs];
    exec_free_ = start + cost;
    exec_busy_ += cost;
    for (int64_t e = data_ptr_; e < data_ptr_ + pops; ++e) entries_[e].pop = exec_free_;
    data_ptr_ += pops;
    last_tok_time_ = t_tok;
    ring = start;
    if (++ring_pos_ == ring_.size()) ring_pos_ = 0;
    max_tok_time_ = std::max(max_tok_time_, t_tok);
    ++n_started_;
    const Link to = linked_ ? LinkAt(tok_pos_) : Link{};
    if (to.delta) {  // linked while indexing: the next token, the pushes before it
      tok_pos_ += to.delta;
      tok_pushes_ += to.pushes;
    } else {
      ++tok_pos_;
      AdvanceToken();
    }
    Mark();
    return true;
  }
  __attribute__((noinline, cold)) bool FailPops(int64_t cs) {
    fatal_ = true;
    *err_ = "callback " + std::to_string(cs) + " pops more data than was pushed";
    return false;
  }
  void Mark() {
    while (marks_ && mark_times_.size() < marks_->size() &&
           (*marks_)[mark_times_.size()] <= n_started_)
      mark_times_.push_back(exec_free_);
  }

  // -- access unit -------------------------------------------------------------------------------
  // Earliest cycle >= t with room for the next entry to reserve; false when blocked.
  bool Reserve(int64_t e, double t, double* room) {
    const int64_t need = entries_[e].bytes;
    while (used_ + need > t_.queue_bytes) {
      const int64_t front = queue_front_;
      while (front >= data_ptr_) {  // not popped yet: run callbacks until it is
        if (!ExecNext()) return false;
      }
      room_at_ = std::max(room_at_, entries_[front].pop);
      used_ -= entries_[front].bytes;
      ++queue_front_;
    }
    *room = std::max(t, room_at_);
    return true;
  }

  // F: the memory system's narrow lookup compiled in (null: called through its pointer).
  template <MemorySystem::NarrowLookupFn F = nullptr>
  __attribute__((always_inline)) void Issue(LayerCursor& lc, double t, double waited) {
    const int64_t i = lc.pos;
    last_issue_ = std::max(last_issue_, t);
    const int64_t e = lc.entry;
    if (e >= 0) repeat_ok_ = false;
    if (e >= 0 && e == reserved_) {
      queue_full_ += waited;
      used_ += entries_[e].bytes;
      ++reserved_;
    }
    const int64_t addr = tr_.a[i], bytes = tr_.b[i], nb = std::max<int64_t>(bytes, 1);
    bytes_loaded_ += bytes;
    const int64_t first = LineOf(addr), last = LineOf(addr + nb - 1);
    double done = t;
    if (mem_.NarrowRun<F>(first, last))
      IssueLines<F, true>(first, last, &t, &done);
    else
      IssueLines<F, false>(first, last, &t, &done);
    max_done_ = std::max(max_done_, done);
    if (e >= 0) {
      entries_[e].push = std::max(entries_[e].push, done);
      --entries_[e].remaining;
    }
    lc.agen = t;
    AdvanceLayer(lc);  // (reads the link in the load's slot: its completion goes there after)
    SetDone(i, done);
  }

  // The requests of lines [first, last], one address generation step apart from *t (each
  // waits for a free request slot); *t: the cycle after the last, *done: the latest
  // completion so far. kNarrow: every line takes the memory system's narrow lookup.
  template <MemorySystem::NarrowLookupFn F, bool kNarrow>
  __attribute__((always_inline)) void IssueLines(int64_t first, int64_t last, double* t_io,
                                                 double* done_io) {
    const double step = t_.agen_step;
    const int64_t cap = t_.outstanding;
    double t = *t_io, done = *done_io, busy = access_busy_;  // (locals: no reloads per line)
    for (int64_t line = first; line <= last; ++line) {
      heap_.PopThrough<IsNarrowFn<F>::value ? 4 : 0>(t);  // (F: 3 levels, then DRAM)
      if (heap_.size() >= cap) t = std::max(t, heap_.pop());
      int where;
      const double c = mem_.Access<F, kNarrow>(line, t, &where);
      heap_.push(c, where < 0 ? mem_.levels() : where);  // by source: a level, DRAM
      done = std::max(done, c);
      t += step;
      busy += step;
    }
    *t_io = t, *done_io = done;
    access_busy_ = busy;
  }

  // Entries without loads that are next in order are reserved (and pushed) at the latest issue
  // cycle, if there is room; else they wait for pops or the final drain
  // (timing.py: _reserve_loadless).
  bool ReserveLoadless() {
    const int64_t n_e = n_entries_;
    while (reserved_ < n_e && entries_[reserved_].loadless) {
      const int64_t e = reserved_;
      double room;
      if (!Reserve(e, last_issue_, &room)) return !fatal_;
      queue_full_ += room - last_issue_;
      used_ += entries_[e].bytes;
      ++reserved_;
      entries_[e].push = room;
      entries_[e].remaining = 0;
    }
    return true;
  }

  // The load the access unit issues next (pick_, pick_t_, pick_wait_); *any: loads are left.
  __attribute__((always_inline)) bool PickNext(bool* any) {
    *any = layers_left_ > 0;  // (the layers with loads left)
    if (!*any) return true;
    if (reserved_ < n_entries_ && entries_[reserved_].loadless && !ReserveLoadless())
      return false;
    const LayerCursor* const layers = layers_.data();
    const int64_t n_layers = (int64_t)layers_.size();
    int64_t best = -1, second = -1;  // the pick, and the one it would be without `best`
    double best_t = 0.0, best_wait = 0.0, second_t = 0.0;
    for (int64_t l = 0; l < n_layers; ++l) {
      const LayerCursor& lc = layers[l];
      if (!lc.left) continue;
      double t = lc.agen;
      if (lc.dep >= 0) {
        const double d = DoneOf(lc.dep);
        if (d < 0) continue;
        t = std::max(t, d);
      }
      double wait = 0.0;
      if (lc.entry >= reserved_) {  // (-1: no entry)
        if (lc.entry > reserved_) continue;
        double room;
        if (!Reserve(lc.entry, t, &room)) {
          if (fatal_) return false;
          continue;
        }
        wait = std::max(0.0, room - t);
        t += wait;
      }
      if (best < 0 || t < best_t) {
        second = best, second_t = best_t;
        best = l, best_t = t, best_wait = wait;
      } else if (second < 0 || t < second_t) {
        second = l, second_t = t;
      }
    }
    if (best < 0)
      return Fail("the access unit deadlocks: the data queue (" +
                  std::to_string(t_.queue_bytes) +
                  " B) cannot hold the entries one callback needs before its control token "
                  "is pushed");
    pick_ = best, pick_t_ = best_t, pick_wait_ = best_wait;
    second_ = second, second_t_ = second_t;
    repeat_ok_ = true;
    return true;
  }

  // After PickNext picked layer `a` and only loads of `a` without a data-queue entry were issued
  // since (repeat_ok_; the last at event `issued`), when its next load has no entry either, no
  // entry without loads waits to be reserved and no other layer's next load depends on
  // `issued`: every other layer's candidate is what PickNext found (nothing it reads changed;
  // its reservations would find the queue as they left it), so PickNext would pick `a`'s next
  // load at *t when that beats the runner-up (second_, second_t_; on equal cycles the layer
  // first in order), and change nothing else (index loads run ahead of the rows they select).
  bool RepeatNext(int64_t a, int64_t issued, double* t) const {
    const LayerCursor& lc = layers_[(size_t)a];
    if (!repeat_ok_ || lc.left == 0 || lc.entry >= 0) return false;
    if (reserved_ < n_entries_ && entries_[reserved_].loadless) return false;
    double at = lc.agen;
    if (lc.dep >= 0) {
      const double d = DoneOf(lc.dep);
      if (d < 0) return false;
      at = std::max(at, d);
    }
    if (second_ >= 0 && !(a < second_ ? at <= second_t_ : at < second_t_)) return false;
    const LayerCursor* const layers = layers_.data();
    const int64_t n_layers = (int64_t)layers_.size();
    for (int64_t l = 0; l < n_layers; ++l)
      if (layers[l].dep == issued && l != a && layers[l].left) return false;
    *t = at;
    return true;
  }

  // When only `lc` has loads left, no entry without loads waits to be reserved and its next
  // load's dependency is issued, PickNext would pick that load at *t (after *wait for room in
  // the data queue when its entry is the next to reserve) and change nothing else: the load
  // can be issued at once (a row's further chunks, the rows after the index loads are done).
  // False also when the entry cannot be reserved yet (PickNext then says why).
  bool SoleNext(const LayerCursor& lc, double* t, double* wait) {
    if (layers_left_ != 1 || lc.left == 0) return false;
    if (reserved_ < n_entries_ && entries_[reserved_].loadless) return false;
    if (lc.entry > reserved_) return false;
    double at = lc.agen;
    const int64_t dep = lc.dep;
    if (dep >= 0) {
      const double d = DoneOf(dep);
      if (d < 0) return false;
      at = std::max(at, d);
    }
    double w = 0.0;
    if (lc.entry == reserved_) {
      double room;
      if (!Reserve(lc.entry, at, &room)) return false;
      w = std::max(0.0, room - at);
      at += w;
    }
    *t = at, *wait = w;
    return true;
  }

  // The replay loop, with the lookup of the shipped targets' levels (4, 8 and 16 ways)
  // compiled in when the target has those.
  bool Replay() {
    constexpr MemorySystem::NarrowLookupFn kShipped = &MemorySystem::NarrowLookup<4, 8, 16>;
    if (mem_.narrow_lookup() == kShipped && mem_.levels() == 3) return ReplayWith<kShipped>();
    return ReplayWith<nullptr>();
  }
  template <MemorySystem::NarrowLookupFn F>
  bool ReplayWith() {
    for (;;) {
      bool any = false;
      if (!PickNext(&any)) return false;
      if (!any) break;
      const int64_t a = pick_;
      LayerCursor& lc = layers_[a];
      int64_t issued = lc.pos;
      Issue<F>(lc, pick_t_, pick_wait_);
      double t, wait;
      for (;;) {
        if (SoleNext(lc, &t, &wait)) {
          repeat_ok_ = false;
          Issue<F>(lc, t, wait);
        } else if (RepeatNext(a, issued, &t)) {
          issued = lc.pos;
          Issue<F>(lc, t, 0.0);
        } else {
          break;
        }
      }
    }
    return Tail();
  }

  // After the last load: the remaining entries without loads, then every callback left.
  bool Tail() {
    const int64_t n_e = n_entries_;
    while (reserved_ < n_e) {
      const int64_t before = reserved_;
      if (!ReserveLoadless()) return false;
      if (reserved_ == before)
        return Fail("the access unit deadlocks: the data queue (" +
                    std::to_string(t_.queue_bytes) +
                    " B) cannot hold the entries one callback needs before its control token "
                    "is pushed");
    }
    while (ExecNext()) {
    }
    if (fatal_) return false;
    Mark();
    if (n_started_ != n_tok_)
      return Fail("callbacks wait for data that is never pushed");
    return true;
  }

  const TimingTarget& t_;
  const TraceView tr_;  // (a copy: its columns one load away)
  std::string* err_;
  MemorySystem mem_;
  InFlight heap_;
  const int line_shift_;  // log2 of the line size, or -1 when it is not a power of two

  std::vector<LayerCursor> layers_;  // in first-appearance order (the reference's dict order)
  int64_t layers_left_ = 0;          // layers with loads left
  // Per load: how far on its layer's next load is, and the pushes between them; per token:
  // the same for the next token (traces of fewer than 2^31 events; longer ones are scanned).
  struct Link {
    int32_t delta = 0, pushes = 0;
  };
  // Per event, one 64-bit slot. A load's: the link to its layer's next load until it issues
  // (the last load of a layer: kNotIssued), then its completion; a token's: the link to the
  // next token. A link is kept with the sign bit set, so as a completion's bits it reads as
  // "not issued" (DoneOf); completions are never negative. Traces of kMaxLinked events or
  // more keep only completions (kNotIssued until issued) and are scanned.
  ColumnArray<uint64_t> slot_;
  bool linked_ = false;
  static constexpr int64_t kMaxLinked = (int64_t)1 << 30;  // (a link's parts fit 31 bits)
  static constexpr uint64_t kSign = (uint64_t)1 << 63;
  static constexpr uint64_t kNotIssued = 0xbff0000000000000ull;  // the bits of -1.0
  static uint64_t PackLink(int64_t delta, int64_t pushes) {
    return kSign | ((uint64_t)pushes << 32) | (uint64_t)(uint32_t)delta;
  }
  Link LinkAt(int64_t i) const {
    const uint64_t s = slot_[(size_t)i];
    return Link{(int32_t)(uint32_t)s, (int32_t)((s >> 32) & 0x7fffffffu)};
  }
  // Load i's completion, or -1 before it issues (the sign bit of a slot's bits: a link, or
  // kNotIssued; -0.0 alone, which a link never is, reads as a completion, as it would).
  double DoneOf(int64_t i) const {
    const uint64_t s = slot_[(size_t)i];
    if ((int64_t)s < 0 && s != kSign) return -1.0;
    double d;
    std::memcpy(&d, &s, sizeof d);
    return d;
  }
  void SetDone(int64_t i, double d) { std::memcpy(&slot_[(size_t)i], &d, sizeof d); }
  // A data-queue entry: what the access unit, the queue and the execute unit know of it, in
  // one place (one host line for all of it).
  struct Entry {
    double push = 0.0, pop = 0.0;  // cycles its data is all in the queue / it is popped
    int64_t bytes = 0;             // size
    int32_t remaining = 0;         // loads not yet done
    bool loadless = false;         // made of no load
  };
  ColumnArray<Entry> entries_;  // in the kept memory of trace columns (no fresh pages)
  int64_t n_entries_ = 0;
  std::vector<double> ring_;         // start cycles of the last ctrl_cap callbacks
  size_t ring_pos_ = 0;              // the slot of callback n_started_ (its number mod size)
  int64_t n_tok_ = 0, tok_pos_ = 0, tok_pushes_ = 0;  // token cursor: next token, pushes before
  double last_tok_time_ = 0.0;

  int64_t n_started_ = 0, data_ptr_ = 0, reserved_ = 0, queue_front_ = 0, used_ = 0;
  int64_t bytes_loaded_ = 0;
  double room_at_ = 0.0, last_issue_ = 0.0, exec_free_ = 0.0, queue_full_ = 0.0, queue_empty_ = 0.0;
  double exec_busy_ = 0.0, access_busy_ = 0.0, max_done_ = 0.0, max_tok_time_ = 0.0;
  bool fatal_ = false;
  int64_t pick_ = 0;
  double pick_t_ = 0.0, pick_wait_ = 0.0;
  // PickNext's runner-up (-1: none) and whether RepeatNext may still rely on it
  int64_t second_ = -1;
  double second_t_ = 0.0;
  bool repeat_ok_ = false;
  const std::vector<int64_t>* marks_ = nullptr;
  std::vector<double> mark_times_;
};

}  // namespace detail

// The target checks both entry points make (false with a one-line reason).
bool CheckTarget(const TimingTarget& target, std::string* err);

}  // namespace ember_emu

#endif  // EMBER_XLA_EMULATOR_NATIVE_TIMING_SIM_H_
