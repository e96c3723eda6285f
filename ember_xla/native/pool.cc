#include "pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

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

Pool& GetPool() {
  static Pool* pool = new Pool();  // never destroyed: detached workers outlive static teardown
  return *pool;
}

}  // namespace

int64_t PoolThreads() { return GetPool().threads(); }

void PoolRun(int64_t parts, const std::function<void(int64_t)>& fn) { GetPool().Run(parts, fn); }

}  // namespace ember
