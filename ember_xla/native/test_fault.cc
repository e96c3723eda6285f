// The test-only wrong-result switch (test_fault.h).
#include "test_fault.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ember {

namespace {

enum class Fault { kNone, kNan, kUlp };

Fault FaultRequested() {
  static const Fault requested = [] {
    const char* v = std::getenv("EMBER_XLA_TEST_WRONG_RESULT");
    if (v == nullptr) return Fault::kNone;
    if (std::strcmp(v, "1") == 0) return Fault::kNan;
    if (std::strcmp(v, "ulp") == 0) return Fault::kUlp;
    return Fault::kNone;
  }();
  return requested;
}

}  // namespace

void InjectTestFault(ffi::AnyBuffer& out) {
  const Fault fault = FaultRequested();
  if (fault == Fault::kNone || out.size_bytes() == 0) return;
  void* first = out.untyped_data();
  if (fault == Fault::kUlp) {  // the next representable value away from zero (f32 only)
    if (out.element_type() == ffi::DataType::F32) {
      uint32_t bits;
      std::memcpy(&bits, first, sizeof bits);
      bits += 1;
      std::memcpy(first, &bits, sizeof bits);
    }
    return;
  }
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
