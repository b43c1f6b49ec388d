#include "tokenizer/chat_template.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
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
  t.source_ = std::string(source);
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

const char* const kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

// What apply_chat_template(continue_final_message=...) appends to the final message, to
// find where the template put it.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";
constexpr std::string_view kContinueTagStripped = "CONTINUE_FINAL_MESSAGE_TAG";

// Marks the final message's field with the tag, returning the text that must appear in the
// render (transformers' `final_message`).
std::string mark_final_message(ordered_json& chat, const std::string& field, const std::string& source) {
  ordered_json& last = chat.back();
  SHARDLM_CHECK(last.contains(field), "continue_final_message is set but the final message has no \"", field,
                "\" to continue");
  const ordered_json final_message = last[field];
  std::vector<std::string> fields{field};
  if (std::find(std::begin(kReasoningFields), std::end(kReasoningFields), field) != std::end(kReasoningFields)) {
    // Reasoning is copied under several names: tag every copy, accept whichever the template reads.
    fields.clear();
    for (const char* f : kReasoningFields) {
      if (last.contains(f) && last[f] == final_message) fields.emplace_back(f);
    }
  }
  const bool read_by_template = std::any_of(fields.begin(), fields.end(), [&](const std::string& f) {
    return source.find(f) != std::string::npos;
  });
  SHARDLM_CHECK(read_by_template, "continue_final_message is set to \"", field,
                "\" but this is not an accepted field in the chat_template");
  if (final_message.is_array()) {
    for (auto block = last[field].rbegin(); block != last[field].rend(); ++block) {
      if (block->is_object() && block->contains("text")) {
        const std::string text = block->at("text").get<std::string>();
        (*block)["text"] = text + std::string(kContinueTag);
        return text;
      }
    }
    fail("continue_final_message is set but we could not find any text to continue in the final message");
  }
  SHARDLM_CHECK(final_message.is_string(), "continue_final_message: the final message's \"", field,
                "\" must be a string or a list of content blocks");
  for (const auto& f : fields) last[f] = last[f].get<std::string>() + std::string(kContinueTag);
  return final_message.get<std::string>();
}

// Cuts the render where the final message ends, as transformers does.
std::string cut_at_final_message(const std::string& rendered, const std::string& final_message) {
  const std::string stripped = jinja::python_strip(final_message, Value::none(), true, true);
  SHARDLM_CHECK(rendered.find(stripped) != std::string::npos &&
                    rendered.find(kContinueTagStripped) != std::string::npos,
                "continue_final_message is set but the final message does not appear in the chat after applying "
                "the chat template (the template may delete parts of it)");
  const size_t tag = rendered.rfind(kContinueTagStripped);
  if (rendered.compare(tag, kContinueTag.size(), kContinueTag) == 0) return rendered.substr(0, tag);
  // The template trimmed the trailing space of the tag, so trailing whitespace is unreliable.
  std::string cut = rendered.substr(0, tag);
  const std::u32string chars = jinja::decode_utf8(cut);
  size_t end = chars.size();
  while (end > 0 && jinja::is_python_space(chars[end - 1])) --end;
  return jinja::encode_utf8(std::u32string_view(chars).substr(0, end));
}

}  // namespace

std::string ChatTemplate::render(const ordered_json& messages, const ChatRenderOptions& options) const {
  SHARDLM_CHECK(messages.is_array(), "chat messages must be a JSON array of message objects, got ",
                messages.type_name());
  SHARDLM_CHECK(!messages.empty(), "cannot apply the chat template to an empty conversation");
  ordered_json prepared = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) prepared.push_back(prepare_message(messages[i], i));
  std::string final_message;
  const bool continue_final = !options.continue_final_message.empty();
  if (continue_final) {
    SHARDLM_CHECK(!options.add_generation_prompt,
                  "continue_final_message and add_generation_prompt are not compatible: continue_final_message lets "
                  "the model continue the final message, add_generation_prompt starts a new assistant message");
    final_message = mark_final_message(prepared, options.continue_final_message, source_);
  }
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
  std::string rendered = evaluator.render(variables);
  return continue_final ? cut_at_final_message(rendered, final_message) : rendered;
}

}  // namespace shardlm::tokenizer
