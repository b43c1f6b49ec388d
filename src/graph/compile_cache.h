#pragma once
// Compiled executables keyed by everything that changes the graph. The first
// request for a key compiles (counted, and logged with its key and time); later
// requests get the cached entry, so a generation runs on one executable per shape.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/logging.h"
#include "core/tensor.h"

namespace shardlm::graph {

struct CompileKey {
  std::string phase;            // "prefill" (a chunk of the prompt) or "decode" (one token per row)
  int64_t batch = 1;
  int64_t slots = 1;            // sequences the KV cache holds (batch of them per step)
  int64_t tokens_per_step = 1;  // chunk length; 1 for decode
  int64_t logit_rows = 1;       // rows the LM head computes
  int64_t candidates = 0;       // each row's best logits the step returns (top_k in the graph); 0: none
  int64_t max_cache_len = 0;
  DType dtype = DType::f32;     // activation dtype
  Device device;
  std::string compiler{};       // the backend's compiler (a PJRT plugin's platform and version)
  int64_t tp_rank = 0, tp_size = 1;

  auto tied() const {
    return std::tie(phase, batch, slots, tokens_per_step, logit_rows, candidates, max_cache_len, dtype, device.kind, device.index,
                    compiler, tp_rank, tp_size);
  }
  bool operator<(const CompileKey& other) const { return tied() < other.tied(); }
  std::string to_string() const {
    return str_cat(phase, " batch=", batch, " slots=", slots, " tokens=", tokens_per_step, " logit_rows=", logit_rows, candidates ? str_cat(" candidates=", candidates) : std::string(),
                   " max_cache_len=", max_cache_len, " dtype=", dtype_name(dtype), " device=", device.to_string(), " compiler=", compiler,
                   " tp=", tp_rank, "/", tp_size);
  }
};

template <typename Entry>
class CompileCache {
 public:
  // The entry for `key`, built by `build` on first use.
  Entry& get(const CompileKey& key, const std::function<Entry()>& build) {
    auto found = entries_.find(key);
    if (found != entries_.end()) return found->second;
    const auto start = std::chrono::steady_clock::now();
    Entry entry = build();
    const double milliseconds =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++compiles_;
    log::info(str_cat("compiled [", key.to_string(), "] in ", milliseconds, " ms"));
    return entries_.emplace(key, std::move(entry)).first->second;
  }
  int64_t compiles() const { return compiles_; }
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }
  template <typename Visit>
  void for_each(Visit visit) const {
    for (const auto& [key, entry] : entries_) visit(key, entry);
  }

 private:
  std::map<CompileKey, Entry> entries_;
  int64_t compiles_ = 0;
};

}  // namespace shardlm::graph
