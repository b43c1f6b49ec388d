#pragma once
// Counters and histograms for /metrics, in Prometheus' text format. Updated from the HTTP
// threads and the engine thread; each update takes one lock.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "generation/engine.h"

namespace shardlm::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double value);
  // `name`_bucket{le=...}, `name`_sum and `name`_count lines.
  std::string text(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // [bounds + 1]: the last counts values above every bound
  double sum_ = 0;
  int64_t count_ = 0;
};

// The engine's state when /metrics is read.
struct EngineGauges {
  int64_t running = 0, waiting = 0, slots = 0, compiles = 0;
  generation::EngineStats stats;  // steps, tokens fed and seconds in prefill and decode
};

class Metrics {
 public:
  Metrics();
  void request_finished(int status);
  void tokens(int64_t prompt, int64_t generated, int64_t cached);
  void time_to_first_token(double seconds);
  void time_per_output_token(double seconds);
  std::string text(const EngineGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, int64_t> requests_by_status_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, cached_prompt_tokens_ = 0;
  Histogram time_to_first_token_, time_per_output_token_;
};

}  // namespace shardlm::server
