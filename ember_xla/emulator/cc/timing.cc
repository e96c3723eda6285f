// Fast core of the DAE timing model: the algorithm of ember_xla/emulator/timing.py (the Python
// reference), decision for decision and in the same floating-point order, so both give the
// same reports. Flat arrays throughout (no maps, no per-event allocation); the C ABI at the end
// takes the trace as numpy arrays (ember_xla/emulator/timing_cc.py).
#include "timing.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "timing_sim.h"

namespace ember_emu {

#if defined(__linux__)
namespace {
struct SpareColumn {
  void* p;
  size_t bytes, elem;
};
constexpr size_t kSpareBytes = (size_t)512 << 20, kSparesPerElem = 6;
std::mutex g_spare_mu;
std::vector<SpareColumn> g_spares;  // freed columns' mappings, kept for the next traces
size_t g_spare_bytes = 0;
}  // namespace

void* GrowColumn(void* p, size_t old_bytes, size_t new_bytes, size_t elem, size_t* got_bytes) {
  if (!p) {  // a new column: the largest kept mapping of its element size, if it is enough
    std::lock_guard<std::mutex> lock(g_spare_mu);
    size_t best = g_spares.size();
    for (size_t k = 0; k < g_spares.size(); ++k)
      if (g_spares[k].elem == elem && g_spares[k].bytes >= new_bytes &&
          (best == g_spares.size() || g_spares[k].bytes > g_spares[best].bytes))
        best = k;
    if (best < g_spares.size()) {
      const SpareColumn sp = g_spares[best];
      g_spares.erase(g_spares.begin() + (std::ptrdiff_t)best);
      g_spare_bytes -= sp.bytes;
      *got_bytes = sp.bytes;
      return sp.p;
    }
  }
  void* q = p ? mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE)
              : mmap(nullptr, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (q == MAP_FAILED) throw std::bad_alloc();
  if (new_bytes >= (size_t)4 << 20) madvise(q, new_bytes, MADV_HUGEPAGE);  // a hint only
  *got_bytes = new_bytes;
  return q;
}
void FreeColumn(void* p, size_t bytes, size_t elem) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(g_spare_mu);
    size_t same = 0;
    for (const SpareColumn& sp : g_spares) same += sp.elem == elem;
    if (same < kSparesPerElem && g_spare_bytes + bytes <= kSpareBytes) {
      g_spares.push_back({p, bytes, elem});
      g_spare_bytes += bytes;
      return;
    }
  }
  munmap(p, bytes);
}
#else
void* GrowColumn(void* p, size_t, size_t new_bytes, size_t, size_t* got_bytes) {
  void* q = std::realloc(p, new_bytes);
  if (!q) throw std::bad_alloc();
  *got_bytes = new_bytes;
  return q;
}
void FreeColumn(void* p, size_t, size_t) { std::free(p); }
#endif

bool CheckTarget(const TimingTarget& target, std::string* err) {
  if (target.levels.empty() || (int64_t)target.levels.size() > kMaxLevels)
    return (*err = "the timing core models 1 to 8 cache levels"), false;
  for (const CacheSpec& s : target.levels)
    if (s.sets <= 0 || s.ways <= 0) return (*err = "a cache level has no sets or ways"), false;
  if (target.line_bytes <= 0 || target.outstanding <= 0 || target.ctrl_cap <= 0)
    return (*err = "line size, outstanding requests and control queue must be positive"), false;
  if (target.dram_channels <= 0 || target.dram_banks < 0 || target.dram_row_lines <= 0)
    return (*err = "DRAM channels and row lines must be positive, banks not negative"), false;
  return true;
}

bool Simulate(const TimingTarget& target, const TraceView& trace, TimingResult* out,
              std::string* err) {
  if (!CheckTarget(target, err)) return false;
  detail::Sim sim(target, trace, err);
  return sim.Run(out);
}

}  // namespace ember_emu

// -- C ABI (ctypes: ember_xla/emulator/timing_cc.py) ---------------------------------------------------
extern "C" struct EmberTimingTarget {
  double agen_step, dram_latency, transfer;
  int64_t queue_bytes, outstanding, ctrl_cap, line_bytes, n_levels;
  const int64_t* level_sets;
  const int64_t* level_ways;
  const int64_t* level_latency;
  int64_t dram_channels, dram_banks, dram_row_lines;
  double dram_row_hit, dram_row_miss;
};

static ember_emu::TimingTarget ember_timing_target(const EmberTimingTarget* tg) {
  ember_emu::TimingTarget t;
  t.agen_step = tg->agen_step, t.dram_latency = tg->dram_latency, t.transfer = tg->transfer;
  t.queue_bytes = tg->queue_bytes, t.outstanding = tg->outstanding, t.ctrl_cap = tg->ctrl_cap;
  t.line_bytes = tg->line_bytes;
  t.dram_channels = tg->dram_channels, t.dram_banks = tg->dram_banks;
  t.dram_row_lines = tg->dram_row_lines;
  t.dram_row_hit = tg->dram_row_hit, t.dram_row_miss = tg->dram_row_miss;
  for (int64_t i = 0; i < tg->n_levels; ++i)
    t.levels.push_back({tg->level_sets[i], tg->level_ways[i], tg->level_latency[i]});
  return t;
}

extern "C" {

// kind: 0 LOAD, 1 PUSH, 2 TOKEN. case_cycles/case_pops indexed by case id (< n_cases; pops < 0
// marks an undefined case). Returns 0 on success; 1 with a message in err when the program does
// not fit or the trace is malformed.
__attribute__((visibility("default"))) int ember_timing_simulate(
    const EmberTimingTarget* tg, int64_t n, const int8_t* kind, const int64_t* a,
    const int64_t* b, const int64_t* c, const int64_t* layer, const uint8_t* queued,
    int64_t n_cases, const double* case_cycles, const int64_t* case_pops,
    ember_emu::TimingResult* out, char* err, int64_t errlen) {
  std::string msg;
  bool ok = false;
  try {
    const ember_emu::TimingTarget t = ember_timing_target(tg);
    const ember_emu::TraceView view{n, kind, a, b, c, layer, queued, n_cases, case_cycles,
                                    case_pops};
    ok = ember_emu::Simulate(t, view, out, &msg);
  } catch (const std::bad_alloc&) {
    msg = "out of memory";
  } catch (const std::exception& e) {
    msg = e.what();
  }
  if (ok) return 0;
  std::snprintf(err, (size_t)errlen, "%s", msg.c_str());
  return 1;
}

}  // extern "C"
