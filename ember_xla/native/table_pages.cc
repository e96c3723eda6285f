#include "table_pages.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <cerrno>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "handler.h"
#include "pages.h"

#if defined(__linux__) && !defined(MADV_COLLAPSE)
#define MADV_COLLAPSE 25  // Linux 6.1; older kernels answer EINVAL, which is counted and ignored
#endif

namespace ember {
namespace {

// Collapsed per system call: short enough that Wait() and the statistics move in small steps.
constexpr uintptr_t kChunk = uintptr_t{32} << 20;
// Ranges remembered per process; beyond this, new tables are left alone (bounded memory).
constexpr size_t kMaxRanges = 4096;

struct Range {
  uintptr_t begin, end;
  int64_t calls = 0;  // calls that read this range (it is collapsed at the second)
};

// Never destroyed: the background thread may still be inside a system call at process exit.
struct State {
  std::atomic<int> mode{ModeFromEnv("EMBER_XLA_TABLE_PAGES")};
  std::mutex mu;
  std::condition_variable work, idle;
  std::vector<Range> seen;      // ranges read by calls (seen once, queued, collapsed or failed)
  std::deque<Range> queue;      // waiting for the background thread
  bool busy = false;            // the background thread is collapsing a range
  bool worker = false;          // the background thread exists (in this process)
  int64_t tables = 0, bytes_done = 0, chunks_failed = 0, last_errno = 0, micros = 0;
};

State& S() {
  static State* s = new State;
  return *s;
}

#if defined(__linux__)
// Collapses [r.begin, r.end) chunk by chunk; returns (bytes collapsed, chunks failed, errno).
void Collapse(const Range& r, int64_t* done, int64_t* failed, int64_t* err) {
  void* p = reinterpret_cast<void*>(r.begin);
  if (madvise(p, r.end - r.begin, MADV_HUGEPAGE) != 0) {
    *failed += 1;
    *err = errno;
    return;
  }
  for (uintptr_t a = r.begin; a < r.end; a += kChunk) {
    const uintptr_t b = a + kChunk < r.end ? a + kChunk : r.end;
    if (madvise(reinterpret_cast<void*>(a), b - a, MADV_COLLAPSE) == 0) {
      *done += static_cast<int64_t>(b - a);
    } else {
      *failed += 1;
      *err = errno;
    }
  }
}

void Run(const Range& r) {
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0, failed = 0, err = 0;
  Collapse(r, &done, &failed, &err);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - t0).count();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.bytes_done += done;
  s.chunks_failed += failed;
  if (err != 0) s.last_errno = err;
  s.micros += us;
}

void Worker() {
  // Lowest priority: the collapse uses CPU time nobody else wants (Linux nice is per thread).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.work.wait(lock, [&] { return !s.queue.empty(); });
    const Range r = s.queue.front();
    s.queue.pop_front();
    s.busy = true;
    lock.unlock();
    Run(r);
    lock.lock();
    s.busy = false;
    if (s.queue.empty()) s.idle.notify_all();
  }
}

// A forked child has no background thread and may have copied the mutex while locked.
void AtForkPrepare() { S().mu.lock(); }
void AtForkParent() { S().mu.unlock(); }
void AtForkChild() {
  State& s = S();
  s.worker = false;
  s.busy = false;
  s.queue.clear();
  s.mu.unlock();
}
#endif

}  // namespace

void AdviseTable(const void* data, size_t bytes) {
#if defined(__linux__)
  State& s = S();
  const int mode = s.mode.load(std::memory_order_relaxed);
  if (mode == 0 || bytes < kTablePagesBytes) return;
  Range r;
  if (!HugeInterior(data, bytes, &r.begin, &r.end)) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    Range* hit = nullptr;
    for (Range& x : s.seen) {
      if (x.calls < 0) continue;  // forgotten, erased below
      if (x.begin == r.begin && x.end == r.end) hit = &x;
      // Two live buffers never overlap: an overlapping range was freed; forget it.
      else if (x.begin < r.end && r.begin < x.end) x.calls = -1;
    }
    if (hit == nullptr) {
      // Seen once: a buffer read by one call only (a training step's fresh table) is not worth
      // seconds of copying; the second call at the same address (a served model's table, or a
      // donated one updated in place) is.
      s.seen.erase(std::remove_if(s.seen.begin(), s.seen.end(),
                                  [&](const Range& x) {
                                    return x.calls < 0 ||
                                           (s.seen.size() >= kMaxRanges && x.calls == 1);
                                  }),
                   s.seen.end());
      if (s.seen.size() < kMaxRanges) s.seen.push_back(Range{r.begin, r.end, 1});
      return;
    }
    if (++hit->calls != 2) return;  // collapsed (or queued) already
    s.tables += 1;
    if (mode == 1) {
      if (!s.worker) {
        static std::once_flag atfork;
        std::call_once(atfork, [] { pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild); });
        try {
          std::thread(Worker).detach();
          s.worker = true;
        } catch (const std::exception&) {
          return;  // no thread: the table stays on small pages (a hint, never a failure)
        }
      }
      s.queue.push_back(r);
      s.work.notify_one();
      return;
    }
  }
  Run(r);  // mode 2: on the calling thread, outside the lock
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace ember

// For benchmarks and tests: switch the mode at run time (0 off, 1 background, 2 on the calling
// thread); returns the previous mode.
EMBER_EXPORT int EmberSetTablePages(int mode) {
  return ember::S().mode.exchange(ember::ClampMode(mode));
}

// The current mode (0 off, 1 background, 2 on the calling thread).
EMBER_EXPORT int EmberTablePagesMode() { return ember::S().mode.load(); }

// Forgets the addresses of the tables seen so far (queued work still runs): a buffer that
// reuses a freed table's address counts from its first call again. The owner of the buffers
// calls it when it frees tables and allocates new ones (a benchmark between two models).
EMBER_EXPORT void EmberTablePagesForget() {
  ember::State& s = ember::S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.seen.clear();
}

// Waits up to `seconds` until no table is queued or being collapsed; 1 when idle, 0 on timeout.
EMBER_EXPORT int EmberTablePagesWait(double seconds) {
  ember::State& s = ember::S();
  std::unique_lock<std::mutex> lock(s.mu);
  return s.idle.wait_for(lock, std::chrono::duration<double>(seconds),
                         [&] { return s.queue.empty() && !s.busy; })
             ? 1
             : 0;
}

// out[0..5): tables collapsed or queued (read by a second call), bytes collapsed, chunks that failed, the last errno of a failed
// madvise (0: none), microseconds spent collapsing.
EMBER_EXPORT void EmberTablePagesStats(int64_t* out) {
  ember::State& s = ember::S();
  std::lock_guard<std::mutex> lock(s.mu);
  out[0] = s.tables;
  out[1] = s.bytes_done;
  out[2] = s.chunks_failed;
  out[3] = s.last_errno;
  out[4] = s.micros;
}
