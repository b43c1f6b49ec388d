#include "core/thread_pool.h"

#include <immintrin.h>

#include <chrono>
#include <mutex>

namespace shardlm {
namespace {

// How long a waiting thread polls before it sleeps (a worker) or yields (the caller):
// longer than the gap between two ops of a decode step, far shorter than the gap
// between two generate() calls. Timed, since a pause instruction lasts 10 to 140
// cycles depending on the processor.
constexpr auto spin_time = std::chrono::microseconds(50);

// Polls `done` until it holds or spin_time has passed; returns whether it holds.
template <typename Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + spin_time;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::take_tasks() {
  for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count_;) {
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        invoke_(context_, i);
      } catch (...) {
        static std::mutex error_mutex;
        std::lock_guard lock(error_mutex);
        if (!failed_.exchange(true)) error_ = std::current_exception();
      }
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    take_tasks();
    workers_done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::run_tasks(int64_t count, void* context, Invoke invoke) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    for (int64_t i = 0; i < count; ++i) invoke(context, i);
    return;
  }
  context_ = context;
  invoke_ = invoke;
  count_ = count;
  failed_.store(false);
  error_ = nullptr;
  workers_done_.store(0, std::memory_order_relaxed);
  next_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  take_tasks();
  const auto workers = static_cast<int64_t>(workers_.size());
  // Yields once the wait outlasts a spin: with more threads than free cores (tests run
  // in parallel), the worker it waits for may need this core.
  const auto all_done = [&] { return workers_done_.load(std::memory_order_acquire) == workers; };
  while (!spin_until(all_done)) std::this_thread::yield();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace shardlm
