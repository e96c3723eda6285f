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

// A binding's first two or three array operands (the table, the indices, then their offsets
// or segment ids).
#define EMBER_ARRAYS_2 \
  xla::ffi::Ffi::Bind().Arg<xla::ffi::AnyBuffer>().Arg<xla::ffi::AnyBuffer>()
#define EMBER_ARRAYS_3 EMBER_ARRAYS_2.Arg<xla::ffi::AnyBuffer>()

// The binding of a one-table reduction: its `arrays`, the weights (or nothing) as
// RemainingArgs, one result, XLA's thread pool, then the six attributes above.
#define EMBER_REDUCTION_BINDING(arrays) \
  EMBER_BIND_ATTRS(arrays.RemainingArgs().Ret<xla::ffi::AnyBuffer>().Ctx<xla::ffi::ThreadPool>())

// Declares, exports and defines the typed-FFI handler symbol `name` running `impl`.
#define EMBER_HANDLER(name, impl, binding)                         \
  EMBER_EXPORT XLA_FFI_Error* name(XLA_FFI_CallFrame* call_frame); \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(name, impl, binding)

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
