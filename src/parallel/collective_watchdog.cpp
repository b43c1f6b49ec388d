#include "parallel/collective_watchdog.h"

#include <unistd.h>

#include <cstdio>

namespace shardlm::parallel {

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::set_timeout(double seconds) {
  timeout_s_.store(seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  if (seconds > 0 && !thread_.joinable()) thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::Watch::Watch(CollectiveWatchdog& dog, const char* collective) : dog_(dog) {
  dog_.collective_.store(collective);
  dog_.started_.store(Clock::now().time_since_epoch().count());
}

CollectiveWatchdog::Watch::~Watch() { dog_.started_.store(0); }

void CollectiveWatchdog::run() {
  // A quarter-second tick: a timeout of seconds overshoots by at most that.
  constexpr auto tick = std::chrono::milliseconds(250);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, tick, [this] { return stopping_; })) {
    const Clock::rep started = started_.load();
    const double timeout = timeout_s_.load();
    if (started == 0 || timeout <= 0) continue;
    const double waited =
        std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(started)).count();
    if (waited < timeout) continue;
    // The main thread is blocked inside MPI, which is not safe to call from here: print,
    // flush what this rank has written, and leave without running exit handlers.
    const std::string message = describe_(collective_.load(), waited);
    std::fflush(stdout);
    std::fprintf(stderr, "shardlm: error: %s\n", message.c_str());
    std::fflush(stderr);
    ::_exit(1);
  }
}

}  // namespace shardlm::parallel
