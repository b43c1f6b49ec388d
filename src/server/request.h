#pragma once
// An OpenAI API request body, parsed and checked: /v1/completions and
// /v1/chat/completions, with the parameters as OpenAI and vLLM name them. Unknown fields
// are ignored, as OpenAI does; a field of the wrong type or out of range is an ApiError
// (400) that names it. Nothing here touches the model: ranges that depend on it (the
// context length) are checked where the prompt is tokenized.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardlm::server {

// An error answered with OpenAI's error object:
// {"error": {"message", "type", "param", "code"}} and HTTP status `status`.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)) {}
  int status;
  std::string param, type;
};

enum class Endpoint { completions, chat_completions };

// A prompt as text or as token ids.
using Prompt = std::variant<std::string, std::vector<int64_t>>;

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::optional<std::string> model;
  std::vector<Prompt> prompts;                   // completions: one or more
  nlohmann::json messages;                       // chat: [{"role", "content"}, ...]
  nlohmann::json chat_template_kwargs = nlohmann::json::object();  // chat: extra template variables
  bool add_generation_prompt = true;             // chat (vLLM's)
  std::optional<int64_t> max_tokens;             // max_tokens or max_completion_tokens; unset: the default
  // Sampling: unset fields take the model's generation_config.json, else these defaults.
  std::optional<float> temperature, top_p, min_p, repetition_penalty;  // [1, 1, 0, 1]
  std::optional<int64_t> top_k;                  // [none]; -1 or 0: none
  float presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_token_ids;           // vLLM's
  int64_t n = 1;
  bool logprobs = false;                         // completions: logprobs >= 0; chat: logprobs true
  int64_t top_logprobs = 0;                      // completions: the logprobs count; chat: top_logprobs
  bool echo = false;                             // completions: the prompt precedes the text
  bool stream = false;
  bool include_usage = false;                    // stream_options.include_usage
  bool ignore_eos = false;                       // vLLM's
  int64_t min_tokens = 0;                        // vLLM's
  bool skip_special_tokens = true;               // vLLM's
};

inline constexpr int64_t max_choices = 64;       // n
inline constexpr int64_t max_top_logprobs = 20;  // as OpenAI
inline constexpr int64_t max_stop_sequences = 16;

// Parses a request body for `endpoint`; throws ApiError naming the field on bad input.
CompletionRequest parse_request(std::string_view body, Endpoint endpoint);

}  // namespace shardlm::server
