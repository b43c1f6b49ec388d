#include <shardlm/auto_tokenizer.h>

#include <nlohmann/json.hpp>

#include "api/impl.h"

namespace shardlm {
namespace {

std::vector<int64_t> widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

nlohmann::ordered_json parse_json_option(const std::string& text, const char* name, bool object) {
  if (text.empty()) return object ? nlohmann::ordered_json::object() : nlohmann::ordered_json();
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) fail("apply_chat_template: ", name, " is not valid JSON");
  if (object && !value.is_object()) fail("apply_chat_template: ", name, " must be a JSON object");
  return value;
}

}  // namespace

AutoTokenizer AutoTokenizer::from_pretrained(const std::string& path_or_id, const std::string& revision) {
  return AutoTokenizer(
      std::make_shared<const Impl>(api::load_tokenizer(io::resolve_model(path_or_id, {.revision = revision}))));
}

std::vector<int64_t> AutoTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  return widen(impl_->pretrained.encode(text, {.add_special_tokens = add_special_tokens}).input_ids.front());
}

BatchEncoding AutoTokenizer::operator()(const std::string& text, bool add_special_tokens) const {
  return (*this)(std::vector<std::string>{text}, add_special_tokens);
}

BatchEncoding AutoTokenizer::operator()(const std::vector<std::string>& texts, bool add_special_tokens) const {
  return (*this)(texts, EncodeOptions{.add_special_tokens = add_special_tokens});
}

BatchEncoding AutoTokenizer::operator()(const std::vector<std::string>& texts, const EncodeOptions& options) const {
  tokenizer::EncodeOptions encode{.add_special_tokens = options.add_special_tokens, .truncation = options.truncation,
                                  .max_length = options.max_length};
  if (options.padding == "longest") {
    encode.padding = tokenizer::Padding::Longest;
  } else if (options.padding == "max_length") {
    encode.padding = tokenizer::Padding::MaxLength;
  } else if (options.padding != "do_not_pad") {
    fail("padding '", options.padding, "' is not one of do_not_pad, longest, max_length");
  }
  if (options.padding_side) {
    if (*options.padding_side != "left" && *options.padding_side != "right")
      fail("padding_side '", *options.padding_side, "' is not left or right");
    encode.padding_side = *options.padding_side == "left" ? tokenizer::Side::Left : tokenizer::Side::Right;
  }
  tokenizer::BatchEncoding encoded = impl_->pretrained.encode(texts, encode);
  BatchEncoding encoding;
  for (size_t row = 0; row < encoded.input_ids.size(); ++row) {
    encoding.input_ids.push_back(widen(encoded.input_ids[row]));
    encoding.attention_mask.push_back(widen(encoded.attention_mask[row]));
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
  return impl_->pretrained.decode(narrow, skip_special_tokens);
}

int64_t AutoTokenizer::vocab_size() const { return impl_->tokenizer().vocab_size(); }

bool AutoTokenizer::has_chat_template() const { return impl_->chat_template.has_value(); }

std::string AutoTokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                               const ChatTemplateOptions& options) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& message : messages) list.push_back({{"role", message.role}, {"content", message.content}});
  return apply_chat_template_json(list.dump(), options);
}

std::string AutoTokenizer::apply_chat_template_json(const std::string& messages_json,
                                                    const ChatTemplateOptions& options) const {
  if (!impl_->chat_template)
    fail(impl_->tokenizer().source_name(), ": tokenizer_config.json has no chat_template: this model is not a chat "
         "model; use plain generation");
  nlohmann::ordered_json messages = parse_json_option(messages_json, "messages", false);
  if (!messages.is_array()) fail("apply_chat_template: messages must be a JSON array of {role, content} objects");
  const tokenizer::TokenizerConfig& config = impl_->pretrained.config();
  tokenizer::ChatRenderOptions render;
  render.add_generation_prompt = options.add_generation_prompt;
  render.tools = parse_json_option(options.tools_json, "tools", false);
  render.documents = parse_json_option(options.documents_json, "documents", false);
  render.extra_variables = parse_json_option(options.extra_variables_json, "extra variables", true);
  render.bos_token = config.bos_token;
  render.eos_token = config.eos_token;
  render.unk_token = config.unk_token;
  render.pad_token = config.pad_token;
  return impl_->chat_template->render(messages, render);
}

}  // namespace shardlm
