#include "pages.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "handler.h"

namespace ember {
namespace {

std::atomic<int>& Mode() {
  static std::atomic<int> mode{ModeFromEnv("EMBER_XLA_OUTPUT_PAGES")};
  return mode;
}

}  // namespace

bool HugeInterior(const void* data, size_t bytes, uintptr_t* begin, uintptr_t* end) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  *begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  *end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  return *end > *begin;
}

int ClampMode(long mode) { return mode < 0 ? 0 : (mode > 2 ? 2 : static_cast<int>(mode)); }

int ModeFromEnv(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr ? 1 : ClampMode(std::strtol(env, nullptr, 10));
}

void AdviseOutput(void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const int mode = Mode().load(std::memory_order_relaxed);
  if (mode == 0 || bytes < kAdviseBytes) return;
  uintptr_t begin, end;
  if (!HugeInterior(data, bytes, &begin, &end)) return;
  // Errors (EINVAL on kernels without THP, ...) are ignored: the advice is only a hint.
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#if defined(MADV_POPULATE_WRITE)
  if (mode == 2)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace ember

// For benchmarks: switch the output-page mode at run time (0 off, 1 advise, 2 + populate);
// returns the previous mode.
EMBER_EXPORT int EmberSetOutputPages(int mode) {
  return ember::Mode().exchange(ember::ClampMode(mode));
}
