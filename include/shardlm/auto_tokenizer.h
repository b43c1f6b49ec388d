#pragma once
// shardlm::AutoTokenizer: tokenizer.json + tokenizer_config.json, used like
// transformers' AutoTokenizer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <shardlm/export.h>

namespace shardlm {

namespace detail {
struct Access;  // the library's own way to a handle's Impl (not part of the API)
}  // namespace detail

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  // JSON text, passed to the template as in transformers: a list of tool schemas, a list
  // of documents, and an object of extra variables (e.g. {"enable_thinking": false}).
  std::string tools_json{};
  std::string documents_json{};
  std::string extra_variables_json{};
};

// How to call a tokenizer on texts, as transformers' __call__ arguments.
struct EncodeOptions {
  bool add_special_tokens = true;
  std::string padding = "do_not_pad";  // or "longest", "max_length"
  bool truncation = false;
  std::optional<int64_t> max_length{};  // for truncation and "max_length" padding; default model_max_length
  std::optional<std::string> padding_side{};  // "left" or "right"; default tokenizer_config.json's
};

// What calling a tokenizer returns: one row per text.
struct BatchEncoding {
  std::vector<std::vector<int64_t>> input_ids;
  std::vector<std::vector<int64_t>> attention_mask;
};

class SHARDLM_API AutoTokenizer {
 public:
  // A checkpoint directory holding tokenizer.json (tokenizer_config.json optional), a
  // model id ("org/name") found in or downloaded to the Hugging Face cache
  // (docs/HUB.md), or "embedded:stories260K" for the built-in model's tokenizer.
  // For a model id, `revision` is a branch, tag or commit hash.
  static AutoTokenizer from_pretrained(const std::string& path_or_id, const std::string& revision = "main");

  // add_special_tokens as tokenizer_config.json / the post-processor say (e.g. BOS).
  BatchEncoding operator()(const std::string& text, bool add_special_tokens = true) const;
  BatchEncoding operator()(const std::vector<std::string>& texts, bool add_special_tokens = true) const;
  // With padding (attention_mask 0 on pad tokens) and truncation.
  BatchEncoding operator()(const std::vector<std::string>& texts, const EncodeOptions& options) const;
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;

  // tokenizer_config.json's chat_template rendered for `messages`, byte for byte as
  // transformers' apply_chat_template(tokenize=False). Throws if there is no template.
  std::string apply_chat_template(const std::vector<ChatMessage>& messages,
                                  const ChatTemplateOptions& options = {}) const;
  // The same with messages as a JSON array (for tool calls and other fields).
  std::string apply_chat_template_json(const std::string& messages_json, const ChatTemplateOptions& options = {}) const;
  bool has_chat_template() const;

  struct Impl;  // what the handle holds (opaque here)

 private:
  friend struct detail::Access;
  explicit AutoTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace shardlm
