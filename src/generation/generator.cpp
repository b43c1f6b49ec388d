#include "generation/generator.h"

#include <algorithm>
#include <optional>
#include <random>

#include "core/error.h"
#include "graph/builder.h"

namespace shardlm::generation {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::eos: return "eos";
    case FinishReason::length: return "length";
    case FinishReason::stop_string: return "stop_string";
  }
  return "?";
}

ResolvedGeneration resolve_generation(const GenerationConfig& model, const GenerationConfig& request,
                                      int64_t prompt_length, int64_t max_position_embeddings) {
  auto pick = [](const auto& requested, const auto& from_model, auto fallback) {
    return requested ? *requested : from_model ? *from_model : fallback;
  };
  ResolvedGeneration resolved;
  SHARDLM_CHECK(prompt_length > 0, "the prompt is empty: generation needs at least one token (e.g. BOS)");
  resolved.sampling.do_sample = pick(request.do_sample, model.do_sample, false);
  resolved.sampling.temperature = pick(request.temperature, model.temperature, 1.0f);
  resolved.sampling.top_k = pick(request.top_k, model.top_k, int64_t{50});
  resolved.sampling.top_p = pick(request.top_p, model.top_p, 1.0f);
  resolved.sampling.min_p = request.min_p ? request.min_p : model.min_p;
  resolved.sampling.repetition_penalty = pick(request.repetition_penalty, model.repetition_penalty, 1.0f);
  resolved.eos_token_id = pick(request.eos_token_id, model.eos_token_id, std::vector<int64_t>{});
  resolved.stop_strings = request.stop_strings.empty() ? model.stop_strings : request.stop_strings;
  resolved.seed = request.seed ? *request.seed : std::random_device{}();

  if (request.max_new_tokens || (!request.max_length && model.max_new_tokens)) {
    resolved.max_new_tokens = pick(request.max_new_tokens, model.max_new_tokens, int64_t{0});
  } else {
    const int64_t max_length = pick(request.max_length, model.max_length, int64_t{20});
    resolved.max_new_tokens = max_length - prompt_length;
    SHARDLM_CHECK(resolved.max_new_tokens > 0, "the prompt has ", prompt_length, " tokens and max_length is ",
                  max_length, ": nothing left to generate; set max_new_tokens");
  }
  SHARDLM_CHECK(resolved.max_new_tokens > 0, "max_new_tokens must be positive, got ", resolved.max_new_tokens);
  const int64_t needed = prompt_length + resolved.max_new_tokens;
  SHARDLM_CHECK(needed <= max_position_embeddings, "the prompt (", prompt_length, " tokens) plus max_new_tokens (",
                resolved.max_new_tokens, ") is ", needed, " positions, beyond the model's max_position_embeddings (",
                max_position_embeddings, "): shorten the prompt or lower max_new_tokens");
  resolved.max_cache_len = request.max_cache_len.value_or(needed);
  SHARDLM_CHECK(resolved.max_cache_len >= needed, "max_cache_len ", resolved.max_cache_len, " cannot hold the prompt (",
                prompt_length, " tokens) plus max_new_tokens (", resolved.max_new_tokens, "): raise it to ", needed);
  const std::string implementation = request.cache_implementation.value_or("static");
  SHARDLM_CHECK(implementation == "static", "cache_implementation '", implementation,
                "' is not supported: shardlm uses a static cache (\"static\")");
  return resolved;
}

namespace {

// True when text[previous_length..] completed a stop string: a match must end past the old text.
bool completes_stop_string(const std::string& text, size_t previous_length, const std::vector<std::string>& stops) {
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t from = previous_length >= stop.size() ? previous_length - stop.size() + 1 : 0;
    if (text.find(stop, from) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Generator::Generator(const models::CausalLM& model, backends::Backend& backend, GenerationConfig model_defaults)
    : model_(model), backend_(backend), model_defaults_(std::move(model_defaults)) {}

void Generator::prepare_cache(int64_t max_cache_len) {
  if (cache_.batch == 1 && cache_.max_cache_len == max_cache_len) return;
  cache_ = {};  // release the old cache before allocating the new one
  cache_ = model_.allocate_cache(backend_, 1, max_cache_len);
}

Tensor Generator::forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions) {
  const int64_t count = static_cast<int64_t>(ids.size());
  SHARDLM_CHECK(start_position + count <= cache_.max_cache_len, "positions up to ", start_position + count,
                " do not fit the KV cache of ", cache_.max_cache_len);
  const int64_t vocab = model_.config().vocab_size;
  Tensor input_ids = Tensor::zeros({1, count}, DType::i32);
  Tensor positions = Tensor::zeros({1, count}, DType::i32);
  for (int64_t i = 0; i < count; ++i) {
    SHARDLM_CHECK(ids[i] >= 0 && ids[i] < vocab, "token id ", ids[i], " is outside the vocabulary [0, ", vocab, ")");
    input_ids.mutable_data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
    positions.mutable_data<int32_t>()[i] = static_cast<int32_t>(start_position + i);
  }
  models::ForwardInputs inputs{input_ids, positions, {}};
  if (!all_positions) {
    inputs.logit_rows = Tensor::zeros({1}, DType::i32);
    inputs.logit_rows.mutable_data<int32_t>()[0] = static_cast<int32_t>(count - 1);
  }
  graph::Builder builder(backend_);
  graph::Value logits = model_.forward(builder, inputs, cache_);
  const Tensor& device_logits = builder.tensor(logits);
  Tensor host_logits = Tensor::zeros(device_logits.shape(), DType::f32);
  backend_.copy_to_host(device_logits, host_logits);
  return host_logits;
}

GenerationResult Generator::generate(std::span<const int64_t> prompt, const GenerationConfig& request,
                                     const TokenCallback& on_token, const tokenizer::Tokenizer* text_tokenizer) {
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  ResolvedGeneration settings =
      resolve_generation(model_defaults_, request, prompt_length, model_.config().max_position_embeddings);
  SHARDLM_CHECK(settings.stop_strings.empty() || text_tokenizer, "stop strings need a tokenizer");
  prepare_cache(settings.max_cache_len);

  TokenSelector selector(settings.sampling, settings.seed);
  std::vector<int64_t> history(prompt.begin(), prompt.end());
  history.reserve(history.size() + settings.max_new_tokens);
  std::unique_ptr<tokenizer::IncrementalDecoder> decoder;
  std::string generated_text;
  if (text_tokenizer) {
    decoder = std::make_unique<tokenizer::IncrementalDecoder>(*text_tokenizer, /*skip_special_tokens=*/true);
    // The prompt primes the decoder, so the first new token gets its leading space right.
    for (int64_t id : prompt) decoder->push(static_cast<int32_t>(id));
  }

  GenerationResult result;
  Tensor logits = forward(prompt, 0, /*all_positions=*/false);
  for (int64_t step = 0; step < settings.max_new_tokens; ++step) {
    if (step > 0) logits = forward(std::span(&history.back(), 1), prompt_length + step - 1, false);
    const int64_t token = selector.select(std::span(logits.mutable_data<float>(), logits.numel()), history);
    history.push_back(token);
    result.generated.push_back(token);

    std::string text = decoder ? decoder->push(static_cast<int32_t>(token)) : std::string();
    const size_t previous_length = generated_text.size();
    generated_text += text;

    std::optional<FinishReason> finish;
    if (std::find(settings.eos_token_id.begin(), settings.eos_token_id.end(), token) != settings.eos_token_id.end()) {
      finish = FinishReason::eos;
    } else if (completes_stop_string(generated_text, previous_length, settings.stop_strings)) {
      finish = FinishReason::stop_string;
    } else if (step + 1 == settings.max_new_tokens) {
      finish = FinishReason::length;
    }
    if (finish && decoder) text += decoder->flush();
    if (on_token) on_token(token, text);
    if (finish) {
      result.finish_reason = *finish;
      break;
    }
  }
  return result;
}

}  // namespace shardlm::generation
