#include <shardlm/auto_tokenizer.h>

#include "api/impl.h"

namespace shardlm {

AutoTokenizer AutoTokenizer::from_pretrained(const std::string& path_or_id) {
  return AutoTokenizer(std::make_shared<const Impl>(api::load_tokenizer(io::resolve_model(path_or_id))));
}

std::vector<int64_t> AutoTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int32_t> ids = impl_->tokenizer.encode(text, add_special_tokens);
  return {ids.begin(), ids.end()};
}

BatchEncoding AutoTokenizer::operator()(const std::string& text, bool add_special_tokens) const {
  return (*this)(std::vector<std::string>{text}, add_special_tokens);
}

BatchEncoding AutoTokenizer::operator()(const std::vector<std::string>& texts, bool add_special_tokens) const {
  BatchEncoding encoding;
  for (const std::string& text : texts) {
    encoding.input_ids.push_back(encode(text, add_special_tokens));
    encoding.attention_mask.emplace_back(encoding.input_ids.back().size(), 1);
  }
  return encoding;
}

std::string AutoTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<int32_t> narrow;
  narrow.reserve(ids.size());
  for (int64_t id : ids) {
    SHARDLM_CHECK(id >= 0 && id <= INT32_MAX, "decode: token id ", id, " is out of range");
    narrow.push_back(static_cast<int32_t>(id));
  }
  return impl_->tokenizer.decode(narrow, skip_special_tokens);
}

int64_t AutoTokenizer::vocab_size() const { return impl_->tokenizer.vocab_size(); }

}  // namespace shardlm
