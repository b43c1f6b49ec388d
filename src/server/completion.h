#pragma once
// One API request from its parsed body to its response: the prompts tokenized (through
// the chat template for chat), checked against the context, turned into the engine's
// sequences (n choices a prompt); then each choice's tokens assembled into OpenAI's
// objects, streamed as Server-Sent Event chunks or returned whole. The text a stop string
// completes is cut before the stop string, as OpenAI and vLLM return it; while streaming,
// text that could be the start of a stop string is held back until it is not.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <shardlm/auto_tokenizer.h>
#include <shardlm/generation_config.h>

#include "generation/sequence.h"
#include "server/request.h"
#include "server/serving_engine.h"

namespace shardlm::server {

// What every request of one server shares.
struct ModelContext {
  std::string name;                             // the served model name
  const AutoTokenizer* tokenizer = nullptr;     // null: token-id prompts only, no text
  const tokenizer::Tokenizer* text_tokenizer = nullptr;  // the same, for streamed text
  GenerationConfig defaults;                    // the model's generation_config.json
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;                    // prompt plus new tokens, per sequence
};

class Completion {
 public:
  // Tokenizes and checks; throws ApiError (400) naming the field on what cannot run.
  Completion(CompletionRequest request, const ModelContext& model);

  // The engine's sequences, choice by choice (prompt p's choice j is p * n + j).
  std::vector<generation::SequenceRequest> sequences() const;
  const CompletionRequest& request() const { return request_; }

  // Not streaming: takes these events into the choices.
  void absorb(const std::vector<ChoiceEvent>& events) {
    for (const ChoiceEvent& event : events) take(event);
  }
  // Streaming: the SSE lines ("data: {...}\n\n") for these events.
  std::string stream_events(const std::vector<ChoiceEvent>& events);
  // Streaming, once every choice has finished: the closing chunks (finish reasons, usage if
  // asked) and "data: [DONE]".
  std::string stream_end(const RequestStream& stream);
  // Not streaming, once every choice has finished: the whole response object.
  nlohmann::json response(const RequestStream& stream);

 private:
  struct Choice {
    size_t prompt = 0;
    std::string text{};                       // everything decoded so far
    size_t sent = 0;                          // bytes of `text` streamed
    std::vector<generation::TokenLogprob> logprobs{};
    std::vector<int64_t> tokens{};
    bool started = false;                     // chat: the role chunk was sent
    std::optional<generation::FinishReason> finish{};
  };
  void take(const ChoiceEvent& event);
  // How much of choice `c`'s text can go out now: all of it once finished (cut at a stop
  // string), else all but what might begin a stop string.
  size_t releasable(const Choice& c) const;
  nlohmann::json chunk(nlohmann::json choices) const;
  nlohmann::json usage(const RequestStream& stream) const;
  nlohmann::json logprobs_json(const std::vector<int64_t>& tokens, const std::vector<generation::TokenLogprob>& lps,
                               size_t text_offset) const;
  std::string token_text(int64_t token) const;

  CompletionRequest request_;
  const ModelContext& model_;
  std::string id_;
  int64_t created_ = 0;
  std::vector<std::vector<int64_t>> prompt_ids_;   // [prompts]
  std::vector<std::string> prompt_texts_;          // [prompts] (echo)
  std::vector<int64_t> max_tokens_;                // [prompts]
  std::vector<Choice> choices_;                    // [prompts * n]
};

// `value` as JSON text; invalid UTF-8 in its strings becomes U+FFFD instead of an error.
std::string json_text(const nlohmann::json& value);
// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_body(const ApiError& error);

}  // namespace shardlm::server
