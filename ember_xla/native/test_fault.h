// A test-only fault: with EMBER_XLA_TEST_WRONG_RESULT=1 in the environment, the single-plan
// reductions (ember.segment_reduce, padded_bag, offsets_bag) write NaN into the first element
// of their result after computing it, so the tests can show that every verification (rewrite
// --verify, batch, emulate) meets a wrong kernel result and fails; with =ulp they move an f32
// result's first element by one unit in the last place (within the model-level tolerance, not
// equal to XLA's value of the cluster). Read once per process; unset (the default) it costs one
// branch per call.
#ifndef EMBER_XLA_NATIVE_TEST_FAULT_H_
#define EMBER_XLA_NATIVE_TEST_FAULT_H_

#include "xla/ffi/api/ffi.h"

namespace ember {

namespace ffi = xla::ffi;

void InjectTestFault(ffi::AnyBuffer& out);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_TEST_FAULT_H_
