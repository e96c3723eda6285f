// Shared pieces of the three FFI handlers: the attribute binding and an exception guard.
//
// Operands: T, the lookup operand(s), then an optional weights operand (taken through
// RemainingArgs, so one handler serves the weighted and unweighted forms; `weighted` must agree
// with its presence). One result. Attributes, all required: combiner (string), index_mode
// (string), wrap_negative (bool), weighted (bool), init (f64), index_bits (i64: 32 or 64).
#ifndef EMBER_XLA_NATIVE_HANDLER_H_
#define EMBER_XLA_NATIVE_HANDLER_H_

#include <exception>
#include <new>
#include <string>

#include "plan.h"

#define EMBER_EXPORT extern "C" __attribute__((visibility("default")))

#define EMBER_BIND_ATTRS(binding)                  \
  binding.Attr<std::string_view>("combiner")       \
      .Attr<std::string_view>("index_mode")        \
      .Attr<bool>("wrap_negative")                 \
      .Attr<bool>("weighted")                      \
      .Attr<double>("init")                        \
      .Attr<int64_t>("index_bits")

namespace ember {

// Runs fn() and turns any C++ exception into an ffi::Error (never let one cross the C ABI).
template <typename Fn>
ffi::Error Guarded(const char* kind, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string("ember.") + kind + ": out of memory");
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal, std::string("ember.") + kind + ": " + e.what());
  }
}

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_HANDLER_H_
