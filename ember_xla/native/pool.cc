#include "pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <memory>
#include <string_view>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace ember {

namespace {

constexpr int64_t kMaxThreads = 8;

struct Task {
  const std::function<void(int64_t)>* fn;
  int64_t parts;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int64_t users = 0;  // workers between picking the task up and dropping it (pool mutex)
  std::mutex mu;
  std::condition_variable cv;
};

// Claims and runs parts of `task` until none are left.
void Drain(Task* task) {
  for (;;) {
    const int64_t p = task->next.fetch_add(1);
    if (p >= task->parts) return;
    (*task->fn)(p);
    if (task->done.fetch_add(1) + 1 == task->parts) {
      std::lock_guard<std::mutex> lock(task->mu);
      task->cv.notify_all();
    }
  }
}

class Pool {
 public:
  Pool() {
    int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    // EMBER_XLA_NUM_THREADS caps the threads one call may use (1: never leave the caller's).
    if (const char* env = std::getenv("EMBER_XLA_NUM_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) hw = std::min<int64_t>(hw, v);
    }
    const int64_t want = std::min(hw, kMaxThreads) - 1;
    for (int64_t i = 0; i < want; ++i) {
      try {
        std::thread(&Pool::Work, this).detach();
        ++workers_;
      } catch (const std::exception&) {
        break;  // run with fewer workers
      }
    }
  }

  int64_t threads() const { return workers_ + 1; }

  void Run(int64_t parts, const std::function<void(int64_t)>& fn) {
    if (parts <= 0) return;
    if (parts == 1 || workers_ == 0) {
      for (int64_t p = 0; p < parts; ++p) fn(p);
      return;
    }
    Task task;
    task.fn = &fn;
    task.parts = parts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(&task);
    }
    cv_.notify_all();
    Drain(&task);
    {
      // Workers that picked the task up may still be running parts: wait for them, then make
      // sure no worker can see the task any more before it goes out of scope.
      std::unique_lock<std::mutex> lock(task.mu);
      task.cv.wait(lock, [&] { return task.done.load() == task.parts; });
    }
    std::unique_lock<std::mutex> lock(mu_);
    auto it = std::find(queue_.begin(), queue_.end(), &task);
    if (it != queue_.end()) queue_.erase(it);
    while (task.users != 0) {  // a worker is between its last part and dropping the task
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      Task* task = queue_.front();
      ++task->users;
      lock.unlock();
      Drain(task);
      lock.lock();
      --task->users;
      // Everything claimed: nobody needs to see this task again.
      if (task->next.load() >= task->parts) {
        auto it = std::find(queue_.begin(), queue_.end(), task);
        if (it != queue_.end()) queue_.erase(it);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task*> queue_;
  int64_t workers_ = 0;
};

// Caps from the environment: EMBER_XLA_NUM_THREADS (threads one call may use), at least 1.
int64_t ThreadCap() {
  static const int64_t cap = [] {
    int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("EMBER_XLA_NUM_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) hw = std::min<int64_t>(hw, v);
    }
    return std::min(hw, kMaxThreads);
  }();
  return cap;
}

bool XlaPoolAllowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("EMBER_XLA_POOL");
    return env == nullptr || std::string_view(env) != "own";
  }();
  return allowed;
}

thread_local xla::ffi::ThreadPool* t_xla_pool = nullptr;
thread_local int64_t t_xla_threads = 0;

// A call's parts on XLA's pool. Helpers hold a reference to the shared state, so one that XLA
// starts late (after the caller has finished every part and returned) only finds nothing left
// to claim: the caller never waits for helpers to start, only for claimed parts to finish, so
// a busy or single-threaded XLA pool cannot deadlock a call.
struct SharedTask {
  const std::function<void(int64_t)>* fn;
  int64_t parts;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
};

void DrainShared(SharedTask* task) {
  for (;;) {
    const int64_t p = task->next.fetch_add(1);
    if (p >= task->parts) return;
    (*task->fn)(p);
    if (task->done.fetch_add(1) + 1 == task->parts) {
      std::lock_guard<std::mutex> lock(task->mu);
      task->cv.notify_all();
    }
  }
}

void RunOnXla(xla::ffi::ThreadPool* xla_pool, int64_t threads, int64_t parts,
              const std::function<void(int64_t)>& fn) {
  auto task = std::make_shared<SharedTask>();
  task->fn = &fn;
  task->parts = parts;
  const int64_t helpers = std::min(threads, parts) - 1;
  for (int64_t h = 0; h < helpers; ++h) xla_pool->Schedule([task] { DrainShared(task.get()); });
  DrainShared(task.get());
  std::unique_lock<std::mutex> lock(task->mu);
  task->cv.wait(lock, [&] { return task->done.load() == task->parts; });
}

Pool& GetPool() {
  static Pool* pool = new Pool();  // never destroyed: detached workers outlive static teardown
  return *pool;
}

}  // namespace

XlaPoolScope::XlaPoolScope(xla::ffi::ThreadPool* pool)
    : prev_(t_xla_pool), prev_threads_(t_xla_threads) {
  int64_t n = 0;
  if (pool != nullptr && XlaPoolAllowed()) n = pool->num_threads();
  if (n >= 1) {
    t_xla_pool = pool;
    t_xla_threads = std::min(n, ThreadCap());
  } else {
    t_xla_pool = nullptr;
    t_xla_threads = 0;
  }
}

XlaPoolScope::~XlaPoolScope() {
  t_xla_pool = prev_;
  t_xla_threads = prev_threads_;
}

int64_t PoolThreads() { return t_xla_pool ? t_xla_threads : GetPool().threads(); }

void PoolRun(int64_t parts, const std::function<void(int64_t)>& fn) {
  if (parts <= 0) return;
  if (t_xla_pool != nullptr) {
    if (parts == 1 || t_xla_threads <= 1) {
      for (int64_t p = 0; p < parts; ++p) fn(p);
      return;
    }
    RunOnXla(t_xla_pool, t_xla_threads, parts, fn);
    return;
  }
  GetPool().Run(parts, fn);
}

}  // namespace ember
