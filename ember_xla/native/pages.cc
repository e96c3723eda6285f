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

int InitialMode() {
  const char* env = std::getenv("EMBER_XLA_OUTPUT_PAGES");
  if (env == nullptr) return 1;
  const long v = std::strtol(env, nullptr, 10);
  return v < 0 ? 0 : (v > 2 ? 2 : static_cast<int>(v));
}

std::atomic<int>& Mode() {
  static std::atomic<int> mode{InitialMode()};
  return mode;
}

}  // namespace

void AdviseOutput(void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const int mode = Mode().load(std::memory_order_relaxed);
  if (mode == 0 || bytes < kAdviseBytes) return;
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end <= begin) return;
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
  return ember::Mode().exchange(mode < 0 ? 0 : (mode > 2 ? 2 : mode));
}
