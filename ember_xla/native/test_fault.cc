// The test-only wrong-result switch (test_fault.h).
#include "test_fault.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ember {

namespace {

bool FaultRequested() {
  static const bool requested = [] {
    const char* v = std::getenv("EMBER_XLA_TEST_WRONG_RESULT");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return requested;
}

}  // namespace

void InjectTestFault(ffi::AnyBuffer& out) {
  if (!FaultRequested() || out.size_bytes() == 0) return;
  void* first = out.untyped_data();
  switch (out.element_type()) {
    case ffi::DataType::F32: {
      const uint32_t nan = 0x7FC00000u;
      std::memcpy(first, &nan, sizeof nan);
      break;
    }
    case ffi::DataType::BF16: {
      const uint16_t nan = 0x7FC0u;
      std::memcpy(first, &nan, sizeof nan);
      break;
    }
    case ffi::DataType::F16: {
      const uint16_t nan = 0x7E00u;
      std::memcpy(first, &nan, sizeof nan);
      break;
    }
    default:
      break;
  }
}

}  // namespace ember
