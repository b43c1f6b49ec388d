#pragma once
// Renders a Hugging Face chat template (tokenizer_config.json's `chat_template`) the way
// transformers' apply_chat_template(..., tokenize=False) does: jinja2 with trim_blocks,
// lstrip_blocks, loop controls, transformers' tojson, raise_exception and strftime_now.
// The interpreter is our own (jinja_*.h); anything it does not support is an error that
// names it, never a silently different prompt.

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace shardlm::tokenizer {

namespace jinja {
struct Template;
}

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  // transformers' continue_final_message: the name of the final message's field to leave
  // open ("content", or a reasoning field), so the model continues it; empty: off.
  std::string continue_final_message;
  // JSON null means "not given": the template sees None, as with transformers' defaults.
  // Ordered JSON keeps the caller's key order, which `tojson` prints.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  // More template variables, e.g. {"enable_thinking": false}; they override the special tokens.
  nlohmann::ordered_json extra_variables = nlohmann::ordered_json::object();
  // Special tokens from tokenizer_config.json. Unset ones are undefined in the template,
  // as transformers leaves out tokens that are None (Qwen3 has no bos_token).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::optional<std::string> pad_token;
  // The local time strftime_now() reports; the current local time when unset.
  std::optional<std::tm> strftime_now_time;
  // Limits on what one render may produce, so a hostile template fails instead of hanging.
  size_t max_output_bytes = size_t{256} << 20;
  uint64_t max_steps = 20'000'000;  // statements run plus loop iterations
};

class ChatTemplate {
 public:
  // Throws shardlm::Error naming source_name, the line, the column and the construct on a
  // syntax error, an unknown filter or test, or a statement we do not support.
  static ChatTemplate parse(std::string_view source, const std::string& source_name);

  // `messages` is a JSON array of message objects ({"role": ..., "content": ...}). As
  // apply_chat_template does, keys whose value is null are dropped and reasoning given as
  // "reasoning_content", "thinking" or "reasoning" is offered under the first two names.
  // Throws shardlm::Error on bad input, on raise_exception() (carrying its message) and on
  // anything the template does that we do not support.
  std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;

  const std::string& source_name() const { return source_name_; }

 private:
  std::shared_ptr<const jinja::Template> template_;
  std::string source_name_;
  std::string source_;  // transformers checks the template text for continue_final_message
};

}  // namespace shardlm::tokenizer
