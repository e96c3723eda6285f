// A tiny persistent worker pool for splitting one kernel call over the machine's cores.
//
// Run(parts, fn) calls fn(p) once for every p in [0, parts) and returns when all are done. The
// calling thread claims parts too, so a call always completes even when every worker is busy
// with other calls (or none could be started, or the process forked): workers only ever help.
#ifndef EMBER_XLA_NATIVE_POOL_H_
#define EMBER_XLA_NATIVE_POOL_H_

#include <cstdint>
#include <functional>

namespace xla::ffi {
class ThreadPool;
}

namespace ember {

// While an XlaPoolScope is alive on a thread, PoolThreads/PoolRun on that thread use XLA's own
// intra-op thread pool (the typed-FFI ThreadPool context, the Eigen pool that runs XLA:CPU's
// compute) instead of ember's private workers: no second set of threads competing with XLA's
// for the cores. Falls back to the private pool when XLA reports no threads, or when
// EMBER_XLA_POOL=own.
class XlaPoolScope {
 public:
  explicit XlaPoolScope(xla::ffi::ThreadPool* pool);
  ~XlaPoolScope();
  XlaPoolScope(const XlaPoolScope&) = delete;
  XlaPoolScope& operator=(const XlaPoolScope&) = delete;

 private:
  xla::ffi::ThreadPool* prev_;
  int64_t prev_threads_;
};

// Number of threads a call may use (workers + the caller), at least 1.
int64_t PoolThreads();

void PoolRun(int64_t parts, const std::function<void(int64_t)>& fn);

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_POOL_H_
