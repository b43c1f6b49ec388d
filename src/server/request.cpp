#include "server/request.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace shardlm::server {

namespace {

using nlohmann::json;

// Deeper than any request needs; a hostile body of nested brackets is refused before the
// DOM (and a recursive dump of it) is built.
constexpr int max_nesting = 64;

bool nests_too_deep(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_nesting) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw ApiError(400, str_cat("'", field, "' ", what), field);
}

std::string type_name(const json& value) { return value.type_name(); }

// The field's value when present and not null.
const json* field(const json& body, const char* name) {
  const auto found = body.find(name);
  return found == body.end() || found->is_null() ? nullptr : &*found;
}

std::optional<double> number(const json& body, const char* name, double low, double high) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) bad(name, str_cat("must be a number, not ", type_name(*value)));
  const double x = value->get<double>();
  if (!std::isfinite(x) || x < low || x > high) bad(name, str_cat("must be in [", low, ", ", high, "], got ", x));
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t low, int64_t high) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number_integer()) bad(name, str_cat("must be an integer, not ", type_name(*value)));
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(high))
    bad(name, str_cat("must be at most ", high));
  const int64_t x = value->get<int64_t>();
  if (x < low || x > high) bad(name, str_cat("must be in [", low, ", ", high, "], got ", x));
  return x;
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) bad(name, str_cat("must be a boolean, not ", type_name(*value)));
  return value->get<bool>();
}

std::vector<int64_t> token_ids(const json& value, const std::string& name) {
  std::vector<int64_t> ids;
  for (const json& id : value) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(name, "must hold non-negative token ids");
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

// A string, a list of strings, a list of token ids, or a list of such lists.
std::vector<Prompt> prompts_of(const json& body) {
  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "is required");
  if (prompt->is_string()) return {prompt->get<std::string>()};
  if (!prompt->is_array() || prompt->empty())
    bad("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists");
  if ((*prompt)[0].is_number_integer()) return {token_ids(*prompt, "prompt")};
  std::vector<Prompt> prompts;
  for (const json& item : *prompt) {
    if (item.is_string()) prompts.emplace_back(item.get<std::string>());
    else if (item.is_array() && !item.empty()) prompts.emplace_back(token_ids(item, "prompt"));
    else bad("prompt", "must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  return prompts;
}

// Chat messages: objects with a string role and content that is a string, null (an
// assistant turn with tool calls) or a list of {"type": "text", "text"} parts (joined).
json messages_of(const json& body) {
  const json* messages = field(body, "messages");
  if (!messages) bad("messages", "is required");
  if (!messages->is_array() || messages->empty()) bad("messages", "must be a non-empty list of messages");
  json checked = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string name = str_cat("messages[", i, "]");
    if (!message.is_object()) bad(name, "must be an object");
    const json* role = field(message, "role");
    if (!role || !role->is_string()) bad(name + ".role", "must be a string");
    json copy = message;
    const json* content = field(message, "content");
    if (content && content->is_array()) {
      std::string text;
      for (const json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          bad(name + ".content", "parts must be {\"type\": \"text\", \"text\": ...}: only text is supported");
        text += part["text"].get<std::string>();
      }
      copy["content"] = text;
    } else if (content && !content->is_string()) {
      bad(name + ".content", str_cat("must be a string or a list of text parts, not ", type_name(*content)));
    }
    checked.push_back(std::move(copy));
  }
  return checked;
}

std::vector<std::string> stops_of(const json& body) {
  const json* stop = field(body, "stop");
  if (!stop) return {};
  if (stop->is_string()) return {stop->get<std::string>()};
  if (!stop->is_array()) bad("stop", "must be a string or a list of strings");
  if (static_cast<int64_t>(stop->size()) > max_stop_sequences) bad("stop", str_cat("holds more than ", max_stop_sequences, " strings"));
  std::vector<std::string> stops;
  for (const json& item : *stop) {
    if (!item.is_string() || item.get<std::string>().empty()) bad("stop", "must hold non-empty strings");
    stops.push_back(item.get<std::string>());
  }
  return stops;
}

}  // namespace

CompletionRequest parse_request(std::string_view body_text, Endpoint endpoint) {
  if (nests_too_deep(body_text)) throw ApiError(400, str_cat("the body nests deeper than ", max_nesting, " levels"));
  const json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "the body is not valid JSON");
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");

  CompletionRequest request;
  request.endpoint = endpoint;
  const bool chat = endpoint == Endpoint::chat_completions;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) bad("model", "must be a string");
    request.model = model->get<std::string>();
  }
  if (chat) {
    request.messages = messages_of(body);
    if (const json* kwargs = field(body, "chat_template_kwargs")) {
      if (!kwargs->is_object()) bad("chat_template_kwargs", "must be an object");
      request.chat_template_kwargs = *kwargs;
    }
    request.add_generation_prompt = boolean(body, "add_generation_prompt").value_or(true);
  } else {
    request.prompts = prompts_of(body);
  }
  constexpr int64_t most_tokens = std::numeric_limits<int32_t>::max();
  request.max_tokens = integer(body, "max_tokens", 1, most_tokens);
  if (const auto completion_tokens = integer(body, "max_completion_tokens", 1, most_tokens))
    request.max_tokens = completion_tokens;
  if (const auto t = number(body, "temperature", 0, 100)) request.temperature = static_cast<float>(*t);
  if (const auto p = number(body, "top_p", 0, 1)) {
    if (*p == 0) bad("top_p", "must be in (0, 1]");
    request.top_p = static_cast<float>(*p);
  }
  request.top_k = integer(body, "top_k", -1, most_tokens);
  if (const auto p = number(body, "min_p", 0, 1)) request.min_p = static_cast<float>(*p);
  if (const auto r = number(body, "repetition_penalty", 0, 100)) {
    if (*r == 0) bad("repetition_penalty", "must be positive");
    request.repetition_penalty = static_cast<float>(*r);
  }
  request.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2).value_or(0));
  request.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2).value_or(0));
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", str_cat("must be an integer, not ", type_name(*seed)));
    request.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  request.stop = stops_of(body);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) bad("stop_token_ids", "must be a list of token ids");
    request.stop_token_ids = token_ids(*ids, "stop_token_ids");
  }
  request.n = integer(body, "n", 1, max_choices).value_or(1);
  if (chat) {
    request.logprobs = boolean(body, "logprobs").value_or(false);
    request.top_logprobs = integer(body, "top_logprobs", 0, max_top_logprobs).value_or(0);
    if (request.top_logprobs > 0 && !request.logprobs) bad("top_logprobs", "needs logprobs: true");
  } else {
    const auto count = integer(body, "logprobs", 0, max_top_logprobs);
    request.logprobs = count.has_value();
    request.top_logprobs = count.value_or(0);
    request.echo = boolean(body, "echo").value_or(false);
  }
  request.stream = boolean(body, "stream").value_or(false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "must be an object");
    request.include_usage = boolean(*options, "include_usage").value_or(false);
  }
  request.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  request.min_tokens = integer(body, "min_tokens", 0, most_tokens).value_or(0);
  request.skip_special_tokens = boolean(body, "skip_special_tokens").value_or(true);
  if (request.max_tokens && request.min_tokens > *request.max_tokens)
    bad("min_tokens", str_cat("(", request.min_tokens, ") exceeds max_tokens (", *request.max_tokens, ")"));
  return request;
}

}  // namespace shardlm::server
