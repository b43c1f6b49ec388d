#pragma once
// shardlm::AutoTokenizer: tokenizer.json + tokenizer_config.json, used like
// transformers' AutoTokenizer.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardlm {

// What calling a tokenizer returns: one row per text.
struct BatchEncoding {
  std::vector<std::vector<int64_t>> input_ids;
  std::vector<std::vector<int64_t>> attention_mask;
};

class AutoTokenizer {
 public:
  // A checkpoint directory holding tokenizer.json (tokenizer_config.json optional), or
  // "embedded:stories260K" for the built-in model's tokenizer.
  static AutoTokenizer from_pretrained(const std::string& path_or_id);

  // add_special_tokens as tokenizer_config.json / the post-processor say (e.g. BOS).
  BatchEncoding operator()(const std::string& text, bool add_special_tokens = true) const;
  BatchEncoding operator()(const std::vector<std::string>& texts, bool add_special_tokens = true) const;
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit AutoTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace shardlm
