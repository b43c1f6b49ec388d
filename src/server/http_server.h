#pragma once
// `shardlm serve`: the OpenAI API over HTTP (cpp-httplib) in front of the serving engine.
// POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
// GET /metrics. Every step shape is compiled before the port opens, so serving never
// compiles. SIGINT, SIGTERM or SIGUSR1 (what `shardlm launch` passes to the ranks): stop
// taking requests, let what runs finish (or cancel it after the grace period), close, return.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <shardlm/auto_model.h>
#include <shardlm/auto_tokenizer.h>

namespace shardlm::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                     // 0: any free port (reported to on_listening)
  std::string served_model_name;       // what /v1/models lists and requests name
  int64_t max_num_seqs = 0;            // sequence slots; 0: sized to memory (at most 16)
  int64_t max_model_len = 0;           // positions per slot; 0: min(max_position_embeddings, 4096)
  int64_t max_waiting = 256;           // sequences queued beyond the slots before 503
  int64_t max_num_batched_tokens = 0;  // token budget of a step; 0: slots + 4 prefill chunks
  int64_t prefill_chunk_size = 32;
  bool prefix_caching = true;
  size_t max_body_bytes = 8 << 20;     // larger bodies get 413
  std::chrono::milliseconds shutdown_grace{30000};
};

// Serves `model` until a signal (or stop()); `on_listening` is called with the bound port
// once requests are taken. `tokenizer` may be null (token-id prompts only).
void serve(AutoModelForCausalLM& model, const AutoTokenizer* tokenizer, const ServeOptions& options,
           const std::function<void(int port)>& on_listening = {});

}  // namespace shardlm::server
