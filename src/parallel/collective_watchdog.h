#pragma once
// CollectiveWatchdog: ends this process when one collective has waited too long. Over
// TCP a lost peer is often silent (a host that stops answering, a link that drops: no
// reset ever arrives), so a rank blocked in MPI_Allreduce would wait forever; the
// watchdog turns that into an exit with a message naming this rank, its host and the
// collective, and mpirun then ends the rest of the job (docs/TENSOR_PARALLEL.md).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace shardlm::parallel {

class CollectiveWatchdog {
 public:
  // Called on the watchdog's thread with the collective's name and the seconds waited;
  // returns the message to print. The process then exits with status 1.
  using Describe = std::function<std::string(const char* collective, double waited_s)>;

  explicit CollectiveWatchdog(Describe describe) : describe_(std::move(describe)) {}
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // 0 (or less) turns it off. The thread starts with the first positive timeout.
  void set_timeout(double seconds);
  double timeout() const { return timeout_s_.load(); }

  // Marks one collective as running for as long as it lives. Collectives do not nest.
  class Watch {
   public:
    Watch(CollectiveWatchdog& dog, const char* collective);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    CollectiveWatchdog& dog_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void run();

  Describe describe_;
  std::atomic<double> timeout_s_{0};
  std::atomic<Clock::rep> started_{0};  // Clock ticks since its epoch; 0: none running
  std::atomic<const char*> collective_{nullptr};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace shardlm::parallel
