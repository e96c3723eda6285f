// The CPU's vector level for the kernels' clones (isa.h).
#include "isa.h"

#include <cstdlib>
#include <string_view>

#include "handler.h"

namespace ember {

int IsaLevel() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const int level = [] {
    const char* isa = std::getenv("EMBER_XLA_ISA");
    const std::string_view cap = isa != nullptr ? std::string_view(isa) : std::string_view();
    if (cap == "baseline") return 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") == 0 || __builtin_cpu_supports("fma") == 0 ||
        __builtin_cpu_supports("f16c") == 0)
      return 0;
    if (cap == "avx2" || __builtin_cpu_supports("avx512f") == 0) return 1;
    return 2;
  }();
  return level;
#else
  return 0;
#endif
}

}  // namespace ember

// The level in force, for tests and benchmarks (C ABI).
EMBER_EXPORT int EmberIsaLevel() { return ember::IsaLevel(); }
