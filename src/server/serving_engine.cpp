#include "server/serving_engine.h"

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "server/request.h"

namespace shardlm::server {

using generation::Sequence;
using generation::SequenceRequest;

bool RequestStream::wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !events_.empty() || finished_ == sequences_.size() || !error_.empty(); });
  for (ChoiceEvent& event : events_) out.push_back(std::move(event));
  events_.clear();
  return !out.empty() || (finished_ < sequences_.size() && error_.empty());
}

const Sequence* RequestStream::sequence(size_t choice) const {
  std::lock_guard lock(mutex_);
  return sequences_.at(choice).get();
}

std::string RequestStream::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void RequestStream::push(ChoiceEvent event) {
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
  changed_.notify_all();
}

void RequestStream::finish(size_t choice, std::unique_ptr<Sequence> sequence) {
  std::lock_guard lock(mutex_);
  sequences_.at(choice) = std::move(sequence);
  ++finished_;
  changed_.notify_all();
}

void RequestStream::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (error_.empty()) error_ = message;
  changed_.notify_all();
}

namespace {

std::string join_sizes(const std::vector<int64_t>& sizes) {
  std::string text;
  for (int64_t size : sizes) text += (text.empty() ? "" : ", ") + std::to_string(size);
  return text;
}

}  // namespace

ServingEngine::ServingEngine(generation::StepRunner& runner, generation::EngineOptions options, size_t max_waiting,
                             Metrics& metrics)
    : runner_(runner), engine_(runner, std::move(options)), max_waiting_(max_waiting), metrics_(metrics) {
  const auto start = std::chrono::steady_clock::now();
  engine_.compile_all();
  compiles_ = runner_.compiles();
  log::notice(str_cat("compiled ", compiles_.load(), " step shapes (decode batches ", engine_.decode_buckets().size(),
                      ", prefill batches ", engine_.prefill_buckets().size(), " of chunk lengths ",
                      join_sizes(engine_.prefill_chunk_buckets()), ") in ",
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s"));
  thread_ = std::thread([this] { loop(); });
}

ServingEngine::~ServingEngine() {
  {
    std::lock_guard lock(mutex_);
    draining_ = stop_now_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestStream> ServingEngine::submit(std::vector<SequenceRequest> sequences) {
  auto stream = std::make_shared<RequestStream>(sequences.size());
  std::lock_guard lock(mutex_);
  if (draining_) throw ApiError(503, "the server is shutting down", {}, "service_unavailable");
  if (!failure_.empty()) throw ApiError(503, "the engine failed: " + failure_, {}, "service_unavailable");
  const auto free_slots = static_cast<size_t>(std::max<int64_t>(0, engine_.slots() - running_.load()));
  if (queued_ + sequences.size() > max_waiting_ + free_slots)
    throw ApiError(503, str_cat("the queue is full (", max_waiting_, " sequences wait for a slot): retry later"), {},
                   "service_unavailable");
  queued_ += sequences.size();
  inbox_.push_back({stream, std::move(sequences)});
  wake_.notify_all();
  return stream;
}

void ServingEngine::cancel(const std::shared_ptr<RequestStream>& stream) {
  std::lock_guard lock(mutex_);
  cancels_.push_back(stream);
  wake_.notify_all();
}

int64_t ServingEngine::drain(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
    wake_.notify_all();
  }
  std::unique_lock lock(mutex_);
  while (thread_.joinable() && (running_ > 0 || queued_ > 0) && std::chrono::steady_clock::now() < deadline) {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    lock.lock();
  }
  const int64_t cancelled = running_ + static_cast<int64_t>(queued_);
  stop_now_ = true;
  wake_.notify_all();
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  return cancelled;
}

bool ServingEngine::healthy() const {
  std::lock_guard lock(mutex_);
  return failure_.empty();
}

EngineGauges ServingEngine::gauges() const {
  std::lock_guard lock(mutex_);
  return {.running = running_, .waiting = static_cast<int64_t>(queued_), .slots = engine_.slots(),
          .compiles = compiles_, .stats = stats_};
}

void ServingEngine::on_token(const Sequence& sequence, int64_t token, std::string_view text) {
  Owner& owner = owners_.at(sequence.id());
  const auto now = std::chrono::steady_clock::now();
  if (token >= 0) {
    if (owner.tokens == 0) {
      owner.first_token = now;
      metrics_.time_to_first_token(std::chrono::duration<double>(now - owner.arrived).count());
    } else {
      metrics_.time_per_output_token(std::chrono::duration<double>(now - owner.last_token).count());
    }
    owner.last_token = now;
    ++owner.tokens;
  }
  ChoiceEvent event{.choice = owner.choice, .token = token, .text = std::string(text),
                    .finish = sequence.finish_reason()};
  if (token >= 0 && !sequence.logprobs().empty()) event.logprob = sequence.logprobs().back();
  owner.stream->push(std::move(event));
}

void ServingEngine::take_inbox(std::vector<Submission>& inbox, std::vector<std::shared_ptr<RequestStream>>& cancels) {
  const auto now = std::chrono::steady_clock::now();
  for (Submission& submission : inbox) {
    for (size_t choice = 0; choice < submission.sequences.size(); ++choice) {
      try {
        const uint64_t id = engine_.add(std::move(submission.sequences[choice]),
                                        [this](const Sequence& s, int64_t token, std::string_view text) {
                                          on_token(s, token, text);
                                        });
        owners_[id] = {.stream = submission.stream, .choice = choice, .arrived = now};
      } catch (const Error& error) {  // checked before submit; anything left fails the request
        submission.stream->fail(error.what());
      }
    }
  }
  for (const auto& stream : cancels)
    for (const auto& [id, owner] : owners_)
      if (owner.stream == stream) engine_.cancel(id);
}

void ServingEngine::hand_over_finished() {
  for (std::unique_ptr<Sequence>& sequence : engine_.finished()) {
    const auto found = owners_.find(sequence->id());
    if (found == owners_.end()) continue;
    metrics_.tokens(sequence->prompt_length(), static_cast<int64_t>(sequence->generated().size()),
                    sequence->reused_prefix());
    const Owner owner = found->second;
    owners_.erase(found);
    owner.stream->finish(owner.choice, std::move(sequence));
  }
  engine_.finished().clear();
}

void ServingEngine::loop() {
  std::vector<Submission> inbox;
  std::vector<std::shared_ptr<RequestStream>> cancels;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_now_ || !inbox_.empty() || !cancels_.empty() || !engine_.idle(); });
      if (stop_now_) break;
      inbox.swap(inbox_);
      cancels.swap(cancels_);
    }
    take_inbox(inbox, cancels);
    inbox.clear();
    cancels.clear();
    try {
      engine_.step();
    } catch (const Error& error) {
      // Every sequence shares the failed step: all of them fail, and the server says so.
      log::write(log::Level::error, str_cat("engine step failed: ", error.what()));
      // The other ranks of a tensor-parallel server wait for the next step: end the job.
      parallel::ProcessGroup& group = runner_.model().process_group();
      if (group.size() > 1) group.abort(str_cat("rank 0's engine step failed: ", error.what()));
      std::lock_guard lock(mutex_);
      failure_ = error.what();
      for (auto& [id, owner] : owners_) owner.stream->fail(failure_);
      owners_.clear();
      running_ = 0;
      queued_ = 0;
      return;
    }
    hand_over_finished();
    std::lock_guard lock(mutex_);
    running_ = static_cast<int64_t>(engine_.running());
    size_t in_inbox = 0;
    for (const Submission& submission : inbox_) in_inbox += submission.sequences.size();
    queued_ = engine_.waiting() + in_inbox;
    compiles_ = runner_.compiles();
    stats_ = engine_.stats();
  }
  // Stopped: whatever is left is cancelled and its clients told.
  for (auto& [id, owner] : owners_) owner.stream->fail("the server shut down before this request finished");
  owners_.clear();
}

}  // namespace shardlm::server
