// The physical floor of an ember call, for benchmarks (benchmarks/bench_call_floor.py; not an
// ember target): a typed-FFI handler bound exactly like ember.segment_reduce (three operands,
// RemainingArgs, one result, XLA's thread pool, the six attributes) whose body does nothing.
// A module calling it costs what XLA:CPU's custom-call machinery costs; the real kernel's time
// above it is ours.
#include "handler.h"

namespace ember {
namespace {

ffi::Error EmptyImpl(ffi::AnyBuffer, ffi::AnyBuffer, ffi::AnyBuffer, ffi::RemainingArgs,
                     ffi::Result<ffi::AnyBuffer>, ffi::ThreadPool, std::string_view,
                     std::string_view, bool, bool, double, int64_t) {
  return ffi::Error::Success();
}

}  // namespace
}  // namespace ember

EMBER_HANDLER(EmberEmptyHandler, ember::EmptyImpl, EMBER_REDUCTION_BINDING(EMBER_ARRAYS_3));
