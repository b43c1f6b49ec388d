#pragma once
// The engine on a thread of its own, for many HTTP threads: each request's sequences (its
// choices) go in through submit(); the engine thread steps the engine and hands every token
// to the request's stream, where the HTTP thread waits for it. A request whose client has
// gone is cancelled at the next step boundary and its slots freed.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "generation/engine.h"
#include "server/metrics.h"

namespace shardlm::server {

struct ChoiceEvent {
  size_t choice = 0;
  int64_t token = -1;  // -1: none (the end of a cancelled sequence)
  std::string text;
  std::optional<generation::TokenLogprob> logprob{};
  std::optional<generation::FinishReason> finish{};
};

// What the engine thread reports to one request's HTTP thread.
class RequestStream {
 public:
  explicit RequestStream(size_t choices) : sequences_(choices) {}
  // Waits up to `timeout` for events and moves them to `out`; false once every choice has
  // finished and nothing is left (or the engine failed: error()).
  bool wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout);
  size_t choices() const { return sequences_.size(); }
  // A finished choice's sequence (its tokens, prompt logprobs, reused prefix); null before.
  const generation::Sequence* sequence(size_t choice) const;
  std::string error() const;

  // The engine thread's side.
  void push(ChoiceEvent event);
  void finish(size_t choice, std::unique_ptr<generation::Sequence> sequence);
  void fail(const std::string& message);

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<ChoiceEvent> events_;
  std::vector<std::unique_ptr<generation::Sequence>> sequences_;
  size_t finished_ = 0;
  std::string error_;
};

class ServingEngine {
 public:
  // Compiles every step shape the engine can run, then starts the engine thread over
  // `runner` (its cache allocated).
  ServingEngine(generation::StepRunner& runner, generation::EngineOptions options, size_t max_waiting,
                Metrics& metrics);
  ~ServingEngine();

  // Queues one request's sequences. Throws ApiError 503 when the queue holds max_waiting
  // sequences already or the server is shutting down.
  std::shared_ptr<RequestStream> submit(std::vector<generation::SequenceRequest> sequences);
  // Cancels what is left of a request (its client has gone).
  void cancel(const std::shared_ptr<RequestStream>& stream);
  // Stops taking requests; what runs finishes, or is cancelled after `grace`; then the
  // engine thread ends. Returns the sequences cancelled.
  int64_t drain(std::chrono::milliseconds grace);
  EngineGauges gauges() const;
  bool healthy() const;
  size_t max_waiting() const { return max_waiting_; }

 private:
  struct Submission {
    std::shared_ptr<RequestStream> stream;
    std::vector<generation::SequenceRequest> sequences;
  };
  struct Owner {
    std::shared_ptr<RequestStream> stream;
    size_t choice = 0;
    std::chrono::steady_clock::time_point arrived, first_token{}, last_token{};
    int64_t tokens = 0;
  };
  void loop();
  void take_inbox(std::vector<Submission>& inbox, std::vector<std::shared_ptr<RequestStream>>& cancels);
  void on_token(const generation::Sequence& sequence, int64_t token, std::string_view text);
  void hand_over_finished();

  generation::StepRunner& runner_;
  generation::Engine engine_;  // the engine thread's only
  size_t max_waiting_;
  Metrics& metrics_;
  std::unordered_map<uint64_t, Owner> owners_;  // by sequence id; the engine thread's only

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submission> inbox_;
  std::vector<std::shared_ptr<RequestStream>> cancels_;
  size_t queued_ = 0;  // sequences submitted and not yet holding a slot
  bool draining_ = false, stop_now_ = false;
  std::string failure_;
  std::atomic<int64_t> running_{0}, compiles_{0};
  generation::EngineStats stats_;  // engine_'s, copied under mutex_ after each step
  std::thread thread_;
};

}  // namespace shardlm::server
