// Redirecting one loaded shared object's calls of a C library function to another function, by
// rewriting that object's global offset table (GOT): the slots the dynamic linker filled with
// the function's address (PLT jump slots, GLOB_DAT and absolute data relocations). Only that
// object's references change; the rest of the process still calls the C library. Used by the
// result-buffer cache (buffer_cache.cc) on XLA:CPU's runtime library.
#ifndef EMBER_XLA_NATIVE_GOT_PATCH_H_
#define EMBER_XLA_NATIVE_GOT_PATCH_H_

#include <cstddef>

namespace ember {

struct GotRedirect {
  const char* symbol;  // e.g. "free"
  void* target;        // the function its slots get
};

// Rewrites, in the first loaded object whose path contains `object`, every GOT slot of each
// redirect's symbol. Returns the number of slots rewritten (0 when no such object is loaded or it
// references none of the symbols), or -1 when a slot's page could not be made writable (the
// slots rewritten before stay rewritten: callers redirect to functions that are correct for
// every caller). Linux x86-64 / aarch64 ELF only; elsewhere returns 0.
int RedirectGot(const char* object, const GotRedirect* redirects, size_t n);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_GOT_PATCH_H_
