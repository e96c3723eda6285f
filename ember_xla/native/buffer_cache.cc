// A cache of XLA:CPU's large result and temporary buffers, so that memory freed by one
// execution is reused by the next instead of being mapped anew.
//
// XLA:CPU allocates every execution's results (and its temporary buffer) with posix_memalign
// and frees them when the arrays die. glibc maps each block above its mmap threshold (at most
// 32 MiB) freshly and unmaps it on free, so a training step that is not donated pays, for every
// new table it writes, a page fault per 4 KiB (or per 2 MiB with huge pages) and the kernel's
// zeroing of the whole table before the step's own copy of it: 1.9-2x the time of the copy
// alone (docs/BENCHMARKS.md). Calls from XLA:CPU's runtime library are redirected here
// (got_patch.h): a block of at least kMinBytes is rounded up to 2 MiB, mapped with huge-page
// advice, and kept when freed; the next request of the same rounded size takes it back, its
// pages already mapped. Every other allocation and every other free goes to the C library.
//
// Bounded: idle blocks are released (munmap) oldest first when their total would pass the
// limit (a quarter of physical memory by default, EMBER_XLA_BUFFER_CACHE_MIB; 0 turns the
// cache off), and a block idle for kIdleSeconds is released by a background thread (a training
// loop frees and reallocates its results every step; a one-off result's memory goes back soon). The
// contents of a reused block are whatever its last user left, which XLA never reads before
// writing (as with any malloc). Each block starts with the header glibc gives its own mapped
// chunks, so a free() that reached the C library by another path would unmap it correctly.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "got_patch.h"
#include "handler.h"

namespace ember {
namespace {

constexpr uintptr_t kHuge = uintptr_t{2} << 20;
constexpr size_t kMinBytes = size_t{8} << 20;
constexpr double kIdleSeconds = 10.0;

using Clock = std::chrono::steady_clock;
using FreeFn = void (*)(void*);
using MemalignFn = int (*)(void**, size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);

struct Idle {
  uintptr_t at;
  Clock::time_point since;
};

struct State {
  std::mutex mu;
  std::condition_variable wake;
  std::unordered_map<uintptr_t, size_t> live;  // block -> rounded length, handed out
  std::multimap<size_t, Idle> idle;            // rounded length -> freed blocks
  size_t idle_bytes = 0;
  size_t limit = 0;  // idle bytes kept at most; 0: caching off
  bool reaper = false;
  uint64_t reused = 0, mapped = 0, released = 0;
};

State& S() {
  static State* s = new State();  // never destroyed: frees may come during exit
  return *s;
}

FreeFn real_free = nullptr;
MemalignFn real_memalign = nullptr;
ReallocFn real_realloc = nullptr;

size_t LimitFromEnv() {
  const char* env = std::getenv("EMBER_XLA_BUFFER_CACHE_MIB");
  if (env != nullptr && *env != '\0') return static_cast<size_t>(std::strtoull(env, nullptr, 10)) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 4 : 0;
}

// [block - page, block + len) mapped, block 2 MiB-aligned, glibc's mapped-chunk header in the
// 16 bytes before it (prev_size = offset from the mapping's start, size | IS_MMAPPED).
uintptr_t MapBlock(size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t total = len + kHuge + page;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0;
  const uintptr_t start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t block = (start + page + kHuge - 1) & ~(kHuge - 1);
  if (block - page > start) munmap(m, block - page - start);
  if (start + total > block + len)
    munmap(reinterpret_cast<void*>(block + len), start + total - block - len);
  auto* header = reinterpret_cast<size_t*>(block - 2 * sizeof(size_t));
  header[0] = page - 2 * sizeof(size_t);
  header[1] = (len + 2 * sizeof(size_t)) | 2;
#if defined(MADV_HUGEPAGE)
  madvise(reinterpret_cast<void*>(block), len, MADV_HUGEPAGE);
#endif
  return block;
}

void Unmap(uintptr_t block, size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  munmap(reinterpret_cast<void*>(block - page), len + page);
}

// Releases idle blocks, oldest first, until at most `keep` bytes stay idle and none is older
// than kIdleSeconds. Called with the lock held; the unmapping happens after it is dropped.
void Trim(State& s, size_t keep, std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  std::multimap<size_t, Idle> out;
  while (!s.idle.empty()) {
    auto oldest = s.idle.begin();
    for (auto it = s.idle.begin(); it != s.idle.end(); ++it)
      if (it->second.since < oldest->second.since) oldest = it;
    const double age = std::chrono::duration<double>(now - oldest->second.since).count();
    if (s.idle_bytes <= keep && age < kIdleSeconds) break;
    s.idle_bytes -= oldest->first;
    ++s.released;
    out.insert(*oldest);
    s.idle.erase(oldest);
  }
  if (out.empty()) return;
  lock.unlock();
  for (const auto& [len, b] : out) Unmap(b.at, len);
  lock.lock();
}

void Reap() {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    if (s.idle.empty())
      s.wake.wait(lock);
    else
      s.wake.wait_for(lock, std::chrono::seconds(1));
    Trim(s, s.limit, lock);
  }
}

int CachedMemalign(void** out, size_t align, size_t size) {
  State& s = S();
  if (size < kMinBytes || align > kHuge || out == nullptr) return real_memalign(out, align, size);
  const size_t len = (size + kHuge - 1) & ~(kHuge - 1);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.limit == 0) return real_memalign(out, align, size);
    auto it = s.idle.find(len);
    if (it != s.idle.end()) {
      const uintptr_t b = it->second.at;
      s.idle.erase(it);
      s.idle_bytes -= len;
      s.live.emplace(b, len);
      ++s.reused;
      *out = reinterpret_cast<void*>(b);
      return 0;
    }
  }
  const uintptr_t b = MapBlock(len);
  if (b == 0) return real_memalign(out, align, size);
  std::lock_guard<std::mutex> lock(s.mu);
  s.live.emplace(b, len);
  ++s.mapped;
  *out = reinterpret_cast<void*>(b);
  return 0;
}

// True when `p` was handed out by the cache (it is then idle, or unmapped when caching is off).
bool TakeBack(void* p) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  if (b == 0 || (b & (kHuge - 1)) != 0) return false;  // every cached block is 2 MiB-aligned
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  auto it = s.live.find(b);
  if (it == s.live.end()) return false;
  const size_t len = it->second;
  s.live.erase(it);
  if (s.limit == 0 || len > s.limit) {
    lock.unlock();
    Unmap(b, len);
    lock.lock();
    ++s.released;
    return true;
  }
  s.idle.emplace(len, Idle{b, Clock::now()});
  s.idle_bytes += len;
  if (s.idle_bytes > s.limit) Trim(s, s.limit, lock);
  if (!s.reaper) {
    s.reaper = true;
    std::thread(Reap).detach();
  }
  s.wake.notify_one();
  return true;
}

void CachedFree(void* p) {
  if (!TakeBack(p)) real_free(p);
}

void* CachedRealloc(void* p, size_t size) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  if (b == 0 || (b & (kHuge - 1)) != 0) return real_realloc(p, size);
  size_t len = 0;
  {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.live.find(b);
    if (it == s.live.end()) return real_realloc(p, size);
    len = it->second;
  }
  void* q = std::malloc(size);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, size < len ? size : len);
  TakeBack(p);
  return q;
}

// fork() while another thread holds the lock would leave the child's copy locked.
void LockForFork() { S().mu.lock(); }
void UnlockAfterFork() { S().mu.unlock(); }
void ChildAfterFork() {
  S().mu.unlock();
  S().reaper = false;  // the reaper thread is not in the child
}

}  // namespace
}  // namespace ember

// Redirects posix_memalign, free and realloc of the loaded object whose path contains `object`
// (XLA:CPU's runtime library) to the cache; idempotent per object. Returns the number of GOT
// slots rewritten (0: not loaded, or caching off by EMBER_XLA_BUFFER_CACHE_MIB=0), -1 on failure.
EMBER_EXPORT int EmberBufferCacheInstall(const char* object) {
  using namespace ember;
  static std::once_flag once;
  std::call_once(once, [] {
    real_free = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "free"));
    real_memalign = reinterpret_cast<MemalignFn>(dlsym(RTLD_DEFAULT, "posix_memalign"));
    real_realloc = reinterpret_cast<ReallocFn>(dlsym(RTLD_DEFAULT, "realloc"));
    S().limit = LimitFromEnv();
    pthread_atfork(LockForFork, UnlockAfterFork, ChildAfterFork);
  });
  if (S().limit == 0 || real_free == nullptr || real_memalign == nullptr || real_realloc == nullptr)
    return 0;
  const GotRedirect redirects[] = {
      {"posix_memalign", reinterpret_cast<void*>(&CachedMemalign)},
      {"free", reinterpret_cast<void*>(&CachedFree)},
      {"realloc", reinterpret_cast<void*>(&CachedRealloc)},
  };
  return RedirectGot(object, redirects, 3);
}

// Sets the idle limit in bytes (0: stop caching; blocks in use are unmapped when freed) and
// releases idle blocks above it; returns the previous limit. For tests and A/B benchmarks.
EMBER_EXPORT uint64_t EmberBufferCacheSetLimit(uint64_t bytes) {
  using namespace ember;
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t old = s.limit;
  s.limit = bytes;
  Trim(s, bytes, lock);
  return old;
}

// out[0..5]: blocks reused, blocks mapped, blocks released, blocks in use, idle blocks, idle bytes.
EMBER_EXPORT void EmberBufferCacheStats(uint64_t* out) {
  using namespace ember;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  out[0] = s.reused;
  out[1] = s.mapped;
  out[2] = s.released;
  out[3] = s.live.size();
  out[4] = s.idle.size();
  out[5] = s.idle_bytes;
}
