#pragma once
// A persistent pool for the CPU kernels: `threads - 1` workers plus the calling
// thread split each op's tasks through one atomic counter. Workers spin briefly
// between ops (a decode step issues hundreds of small ops back to back), then sleep
// on the generation counter, so an idle model costs no CPU. run() returns only after
// every worker has checked out of it, so no late worker can touch the next run.

#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <thread>
#include <vector>

namespace shardlm {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls task(i) for every i in [0, count), spread over the pool; returns when all
  // have run. An exception from a task is rethrown here after the others finish.
  // Not reentrant: a task must not call run() again. Allocates nothing.
  template <typename Task>
  void run(int64_t count, Task&& task) {
    run_tasks(count, &task, [](void* context, int64_t i) { (*static_cast<std::remove_reference_t<Task>*>(context))(i); });
  }

 private:
  using Invoke = void (*)(void* context, int64_t task);
  void run_tasks(int64_t count, void* context, Invoke invoke);
  void worker_loop();
  void take_tasks();

  std::vector<std::thread> workers_;
  void* context_ = nullptr;
  Invoke invoke_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> workers_done_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

}  // namespace shardlm
