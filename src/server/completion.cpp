#include "server/completion.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"

namespace shardlm::server {

using generation::FinishReason;
using generation::SequenceRequest;
using generation::TokenLogprob;
using nlohmann::json;

namespace {

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += digits[random() % 16];
  return id;
}

const char* finish_reason_text(FinishReason reason) {
  return reason == FinishReason::length ? "length" : "stop";  // eos and stop strings are both "stop"
}

json bytes_of(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// Text for JSON: invalid UTF-8 (a token that ends inside a character) becomes U+FFFD.
std::string valid_utf8(const std::string& text) { return json::parse(json_text(json(text))).get<std::string>(); }

}  // namespace

std::string json_text(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.status}}}};
}

Completion::Completion(CompletionRequest request, const ModelContext& model)
    : request_(std::move(request)), model_(model),
      id_(random_id(request_.endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  const bool chat = request_.endpoint == Endpoint::chat_completions;
  if (request_.model && *request_.model != model_.name)
    throw ApiError(404, str_cat("The model `", *request_.model, "` does not exist: this server serves `", model_.name,
                                "`"),
                   "model", "not_found_error");
  if (!model_.tokenizer && (chat || !request_.stop.empty()))
    throw ApiError(400, "this model has no tokenizer.json: only /v1/completions with token-id prompts and no stop strings",
                   chat ? "messages" : "stop");
  if (chat) {
    if (!model_.tokenizer->has_chat_template())
      throw ApiError(400, "this model has no chat_template (tokenizer_config.json): use /v1/completions", "messages");
    ChatTemplateOptions options{.add_generation_prompt = request_.add_generation_prompt};
    if (!request_.chat_template_kwargs.empty()) options.extra_variables_json = request_.chat_template_kwargs.dump();
    std::string rendered;
    try {
      rendered = model_.tokenizer->apply_chat_template_json(request_.messages.dump(), options);
    } catch (const Error& error) {
      throw ApiError(400, str_cat("the chat template cannot render these messages: ", error.what()), "messages");
    }
    // As apply_chat_template(tokenize=True): the template already holds the special tokens.
    prompt_ids_.push_back(model_.tokenizer->encode(rendered, /*add_special_tokens=*/false));
    prompt_texts_.push_back(rendered);
  } else {
    for (const Prompt& prompt : request_.prompts) {
      if (const auto* text = std::get_if<std::string>(&prompt)) {
        if (!model_.tokenizer) throw ApiError(400, "this model has no tokenizer.json: send token ids", "prompt");
        prompt_ids_.push_back(model_.tokenizer->encode(*text));
        prompt_texts_.push_back(*text);
        continue;
      }
      const auto& ids = std::get<std::vector<int64_t>>(prompt);
      for (int64_t id : ids)
        if (id >= model_.vocab_size)
          throw ApiError(400, str_cat("token id ", id, " is outside the vocabulary (", model_.vocab_size, " tokens)"),
                         "prompt");
      prompt_ids_.push_back(ids);
      prompt_texts_.push_back(model_.tokenizer ? model_.tokenizer->decode(ids) : std::string());
    }
  }
  const char* prompt_field = chat ? "messages" : "prompt";
  for (const std::vector<int64_t>& ids : prompt_ids_) {
    const auto length = static_cast<int64_t>(ids.size());
    if (length == 0) throw ApiError(400, "the prompt is empty: it tokenizes to no tokens", prompt_field);
    // OpenAI's legacy completions default to 16 new tokens; chat to what the context leaves.
    const int64_t wanted = request_.max_tokens.value_or(chat ? model_.max_model_len - length : 16);
    if (length + std::max<int64_t>(wanted, 1) > model_.max_model_len)
      throw ApiError(400,
                     str_cat("This model's maximum context length is ", model_.max_model_len, " tokens. However, you "
                             "requested ", length + wanted, " tokens (", length, " in the ", prompt_field, ", ", wanted,
                             " in the completion). Please reduce the length of the ", prompt_field, " or max_tokens."),
                     request_.max_tokens ? "max_tokens" : prompt_field);
    if (request_.min_tokens > wanted)
      throw ApiError(400, str_cat("min_tokens (", request_.min_tokens, ") exceeds max_tokens (", wanted, ")"),
                     "min_tokens");
    max_tokens_.push_back(wanted);
  }
  for (size_t p = 0; p < prompt_ids_.size(); ++p)
    for (int64_t j = 0; j < request_.n; ++j) choices_.push_back({.prompt = p});
}

std::vector<SequenceRequest> Completion::sequences() const {
  const GenerationConfig& d = model_.defaults;
  const float temperature = request_.temperature.value_or(d.temperature.value_or(1.0f));
  generation::SamplingSettings sampling{
      .do_sample = temperature > 0,
      .temperature = temperature > 0 ? temperature : 1.0f,
      .top_k = std::max<int64_t>(0, request_.top_k.value_or(d.top_k.value_or(0))),
      .top_p = request_.top_p.value_or(d.top_p.value_or(1.0f)),
      .min_p = request_.min_p ? request_.min_p : d.min_p,
      .repetition_penalty = request_.repetition_penalty.value_or(d.repetition_penalty.value_or(1.0f)),
      .presence_penalty = request_.presence_penalty,
      .frequency_penalty = request_.frequency_penalty};
  if (sampling.min_p && *sampling.min_p == 0) sampling.min_p.reset();
  std::vector<int64_t> stop_ids = request_.stop_token_ids;
  if (!request_.ignore_eos && d.eos_token_id) stop_ids.insert(stop_ids.end(), d.eos_token_id->begin(), d.eos_token_id->end());
  const uint64_t seed = request_.seed.value_or(std::random_device{}());
  std::vector<SequenceRequest> sequences;
  for (size_t c = 0; c < choices_.size(); ++c) {
    const size_t p = choices_[c].prompt;
    sequences.push_back({.prompt = prompt_ids_[p],
                         .sampling = sampling,
                         .seed = seed + c,
                         .stop = {.max_new_tokens = max_tokens_[p],
                                  .min_new_tokens = request_.min_tokens,
                                  .eos_token_id = stop_ids,
                                  .stop_strings = request_.stop},
                         .tokenizer = model_.text_tokenizer,
                         .skip_special_tokens = request_.skip_special_tokens,
                         .logprobs = request_.logprobs,
                         .top_logprobs = request_.top_logprobs,
                         .prompt_logprobs = request_.echo && request_.logprobs});
  }
  return sequences;
}

void Completion::take(const ChoiceEvent& event) {
  Choice& choice = choices_.at(event.choice);
  choice.text += event.text;
  if (event.token >= 0) choice.tokens.push_back(event.token);
  if (event.logprob) choice.logprobs.push_back(*event.logprob);
  if (event.finish) choice.finish = event.finish;
}

size_t Completion::releasable(const Choice& c) const {
  if (c.finish == FinishReason::stop_string) {
    size_t cut = c.text.size();
    for (const std::string& stop : request_.stop) cut = std::min(cut, c.text.find(stop));
    return std::max(cut, c.sent);
  }
  if (c.finish || request_.stop.empty()) return c.text.size();
  size_t longest = 0;
  for (const std::string& stop : request_.stop) longest = std::max(longest, stop.size());
  size_t end = c.text.size() >= longest ? c.text.size() - (longest - 1) : 0;
  while (end > c.sent && end < c.text.size() && (static_cast<unsigned char>(c.text[end]) & 0xC0) == 0x80) --end;
  return std::max(end, c.sent);
}

std::string Completion::token_text(int64_t token) const {
  return model_.tokenizer ? model_.tokenizer->decode({token}) : std::to_string(token);
}

json Completion::logprobs_json(const std::vector<int64_t>& tokens, const std::vector<TokenLogprob>& lps,
                               size_t text_offset) const {
  if (request_.endpoint == Endpoint::chat_completions) {
    json content = json::array();
    for (size_t i = 0; i < lps.size() && i < tokens.size(); ++i) {
      const std::string text = token_text(tokens[i]);
      json top = json::array();
      for (const auto& [id, lp] : lps[i].top) {
        const std::string alternative = token_text(id);
        top.push_back({{"token", valid_utf8(alternative)}, {"logprob", lp}, {"bytes", bytes_of(alternative)}});
      }
      content.push_back({{"token", valid_utf8(text)}, {"logprob", lps[i].logprob}, {"bytes", bytes_of(text)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json out{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
           {"text_offset", json::array()}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string text = valid_utf8(token_text(tokens[i]));
    out["tokens"].push_back(text);
    out["text_offset"].push_back(text_offset);
    text_offset += text.size();
    if (i >= lps.size()) {
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      continue;
    }
    out["token_logprobs"].push_back(lps[i].logprob);
    json top = json::object();
    for (const auto& [id, lp] : lps[i].top) top[valid_utf8(token_text(id))] = lp;
    out["top_logprobs"].push_back(top);
  }
  return out;
}

json Completion::chunk(json choices) const {
  return {{"id", id_},
          {"object", request_.endpoint == Endpoint::chat_completions ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_.name},
          {"choices", std::move(choices)}};
}

std::string Completion::stream_events(const std::vector<ChoiceEvent>& events) {
  std::vector<size_t> touched;
  for (const ChoiceEvent& event : events) {
    take(event);
    if (std::find(touched.begin(), touched.end(), event.choice) == touched.end()) touched.push_back(event.choice);
  }
  const bool chat = request_.endpoint == Endpoint::chat_completions;
  std::string out;
  const auto send = [&](json choice) { out += "data: " + json_text(chunk(json::array({std::move(choice)}))) + "\n\n"; };
  for (size_t index : touched) {
    Choice& c = choices_[index];
    if (chat && !c.started) {
      send({{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
            {"finish_reason", nullptr}});
    }
    std::string piece = c.text.substr(c.sent, releasable(c) - c.sent);
    if (!chat && request_.echo && !c.started) piece = prompt_texts_[c.prompt] + piece;
    c.started = true;
    c.sent = releasable(c);
    const bool finished = c.finish && c.finish != FinishReason::cancelled;
    if (piece.empty() && !finished) continue;
    json choice{{"index", index}, {"logprobs", nullptr},
                {"finish_reason", finished ? json(finish_reason_text(*c.finish)) : json(nullptr)}};
    if (request_.logprobs && !c.logprobs.empty()) {
      choice["logprobs"] = logprobs_json(c.tokens, c.logprobs, 0);
      c.tokens.clear();
      c.logprobs.clear();
    }
    if (chat) choice["delta"] = piece.empty() ? json::object() : json{{"content", piece}};
    else choice["text"] = piece;
    send(std::move(choice));
  }
  return out;
}

json Completion::usage(const RequestStream& stream) const {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
  for (size_t p = 0; p < prompt_ids_.size(); ++p) {
    prompt_tokens += static_cast<int64_t>(prompt_ids_[p].size());
    int64_t fewest_reused = static_cast<int64_t>(prompt_ids_[p].size());
    for (size_t c = 0; c < choices_.size(); ++c) {
      if (choices_[c].prompt != p) continue;
      const generation::Sequence* sequence = stream.sequence(c);
      if (!sequence) continue;
      completion_tokens += static_cast<int64_t>(sequence->generated().size());
      fewest_reused = std::min(fewest_reused, sequence->reused_prefix());
    }
    cached += fewest_reused;
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string Completion::stream_end(const RequestStream& stream) {
  std::string out;
  if (request_.include_usage) {
    json last = chunk(json::array());
    last["usage"] = usage(stream);
    out += "data: " + json_text(last) + "\n\n";
  }
  return out + "data: [DONE]\n\n";
}

json Completion::response(const RequestStream& stream) {
  const bool chat = request_.endpoint == Endpoint::chat_completions;
  json choices = json::array();
  for (size_t index = 0; index < choices_.size(); ++index) {
    Choice& c = choices_[index];
    const generation::Sequence* sequence = stream.sequence(index);
    std::string text = c.text.substr(0, releasable(c));
    json choice{{"index", index},
                {"logprobs", nullptr},
                {"finish_reason", c.finish ? json(finish_reason_text(*c.finish)) : json(nullptr)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
      if (request_.logprobs) choice["logprobs"] = logprobs_json(c.tokens, c.logprobs, 0);
    } else {
      std::vector<int64_t> tokens;
      std::vector<TokenLogprob> lps;
      if (request_.echo) {
        text = prompt_texts_[c.prompt] + text;
        tokens = prompt_ids_[c.prompt];
        lps.push_back({});  // the first prompt token has no logprob
        if (sequence) lps.insert(lps.end(), sequence->prompt_logprobs().begin(), sequence->prompt_logprobs().end());
      }
      if (request_.logprobs) {
        json lp = logprobs_json(tokens, lps, 0);
        if (request_.echo && !lp["token_logprobs"].empty()) {
          lp["token_logprobs"][0] = nullptr;
          lp["top_logprobs"][0] = nullptr;
        }
        const json generated = logprobs_json(c.tokens, c.logprobs, text.size() - c.text.substr(0, releasable(c)).size());
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& item : generated[key]) lp[key].push_back(item);
        choice["logprobs"] = lp;
      }
      choice["text"] = text;
    }
    choices.push_back(std::move(choice));
  }
  json body{{"id", id_},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", model_.name},
            {"choices", choices},
            {"usage", usage(stream)}};
  return body;
}

}  // namespace shardlm::server
