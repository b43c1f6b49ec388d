#include "tokenizer/chat_template.h"

#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_evaluator.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_value.h"

namespace shardlm::tokenizer {

using jinja::Value;
using nlohmann::ordered_json;

ChatTemplate ChatTemplate::parse(std::string_view source, const std::string& source_name) {
  ChatTemplate t;
  t.template_ = jinja::parse_template(source, source_name);
  t.source_name_ = source_name;
  return t;
}

namespace {

// transformers (5.x) prepares each message before rendering: None values are dropped,
// and reasoning is aliased so templates reading either name find it.
ordered_json prepare_message(const ordered_json& message, size_t index) {
  SHARDLM_CHECK(message.is_object(), "chat message ", index, " must be a JSON object, got ", message.type_name());
  ordered_json prepared = ordered_json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) prepared[key] = value;
  }
  const ordered_json* reasoning = nullptr;
  for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
    if (prepared.contains(field)) {
      reasoning = &prepared[field];
      break;
    }
  }
  if (reasoning == nullptr) return prepared;
  // {"thinking": reasoning, **message, "reasoning_content": reasoning}
  const ordered_json value = *reasoning;
  ordered_json aliased = ordered_json::object();
  aliased["thinking"] = value;
  for (const auto& [key, item] : prepared.items()) aliased[key] = item;
  aliased["reasoning_content"] = value;
  return aliased;
}

}  // namespace

std::string ChatTemplate::render(const ordered_json& messages, const ChatRenderOptions& options) const {
  SHARDLM_CHECK(messages.is_array(), "chat messages must be a JSON array of message objects, got ",
                messages.type_name());
  SHARDLM_CHECK(!messages.empty(), "cannot apply the chat template to an empty conversation");
  ordered_json prepared = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) prepared.push_back(prepare_message(messages[i], i));
  if (!options.tools.is_null()) {
    SHARDLM_CHECK(options.tools.is_array(), "chat template tools must be a JSON array of tool schemas");
    for (const auto& tool : options.tools) {
      SHARDLM_CHECK(tool.is_object(), "each chat template tool must be a JSON object (a JSON schema)");
    }
  }
  if (!options.documents.is_null()) {
    SHARDLM_CHECK(options.documents.is_array(), "chat template documents must be a JSON array");
    for (const auto& document : options.documents) {
      SHARDLM_CHECK(document.is_object(), "documents should be a list of dicts with 'title' and 'text' keys");
    }
  }
  SHARDLM_CHECK(options.extra_variables.is_object(), "chat template extra variables must be a JSON object");

  std::vector<std::pair<std::string, Value>> variables;
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
      {"bos_token", &options.bos_token},
      {"eos_token", &options.eos_token},
      {"unk_token", &options.unk_token},
      {"pad_token", &options.pad_token}};
  for (const auto& [name, token] : tokens) {
    if (token->has_value()) variables.emplace_back(name, Value(**token));
  }
  for (const auto& [key, value] : options.extra_variables.items()) {
    SHARDLM_CHECK(key != "messages" && key != "tools" && key != "documents" && key != "add_generation_prompt",
                  "chat template extra variable '", key, "' must be given through its own option");
    variables.emplace_back(key, Value::from_json(value));
  }
  variables.emplace_back("messages", Value::from_json(prepared));
  variables.emplace_back("tools", Value::from_json(options.tools));
  variables.emplace_back("documents", Value::from_json(options.documents));
  variables.emplace_back("add_generation_prompt", Value(options.add_generation_prompt));

  jinja::RenderLimits limits;
  limits.max_output_bytes = options.max_output_bytes;
  limits.max_steps = options.max_steps;
  jinja::Evaluator evaluator(*template_, limits, options.strftime_now_time);
  return evaluator.render(variables);
}

}  // namespace shardlm::tokenizer
