// Output pages: XLA:CPU hands every execution fresh output memory (measured: one minor page
// fault per 4 KiB of a 27 MB concatenated result, every run), so writing a large result costs
// thousands of page faults. AdviseOutput() asks the kernel for transparent huge pages on the
// 2 MiB-aligned part of a large result before it is written (MADV_HUGEPAGE: a hint, never a
// change of contents; one fault per 2 MiB instead of per 4 KiB when THP is in madvise or always
// mode). Mode (EMBER_XLA_OUTPUT_PAGES, or EmberSetOutputPages() for interleaved A/B runs):
// 0 = off, 1 = huge-page advice (default), 2 = advice + MADV_POPULATE_WRITE (pre-fault in one
// system call on the calling thread).
#ifndef EMBER_XLA_NATIVE_PAGES_H_
#define EMBER_XLA_NATIVE_PAGES_H_

#include <cstddef>
#include <cstdint>

namespace ember {

// The 2 MiB-aligned interior [*begin, *end) of [data, data + bytes): what can sit on huge
// pages. False when it is empty.
bool HugeInterior(const void* data, size_t bytes, uintptr_t* begin, uintptr_t* end);

// A page mode 0..2: `mode` clamped, or the environment variable `name` read as an integer
// (default 1 when unset) and clamped.
int ClampMode(long mode);
int ModeFromEnv(const char* name);

// Results smaller than this are left alone (a few pages: the system call would cost more).
constexpr size_t kAdviseBytes = size_t{4} << 20;

void AdviseOutput(void* data, size_t bytes);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_PAGES_H_
