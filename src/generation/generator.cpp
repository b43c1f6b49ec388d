#include "generation/generator.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"

namespace shardlm::generation {

ResolvedGeneration resolve_generation(const GenerationConfig& model, const GenerationConfig& request,
                                      int64_t longest_prompt, int64_t max_position_embeddings) {
  auto pick = [](const auto& requested, const auto& from_model, auto fallback) {
    return requested ? *requested : from_model ? *from_model : fallback;
  };
  ResolvedGeneration resolved;
  SHARDLM_CHECK(longest_prompt > 0, "the prompt is empty: generation needs at least one token (e.g. BOS)");
  resolved.sampling.do_sample = pick(request.do_sample, model.do_sample, false);
  resolved.sampling.temperature = pick(request.temperature, model.temperature, 1.0f);
  resolved.sampling.top_k = pick(request.top_k, model.top_k, int64_t{50});
  resolved.sampling.top_p = pick(request.top_p, model.top_p, 1.0f);
  resolved.sampling.min_p = request.min_p ? request.min_p : model.min_p;
  resolved.sampling.repetition_penalty = pick(request.repetition_penalty, model.repetition_penalty, 1.0f);
  resolved.eos_token_id = pick(request.eos_token_id, model.eos_token_id, std::vector<int64_t>{});
  resolved.stop_strings = request.stop_strings.empty() ? model.stop_strings : request.stop_strings;
  resolved.seed = request.seed ? *request.seed : std::random_device{}();
  resolved.compile = !pick(request.disable_compile, model.disable_compile, false);
  resolved.prefill_chunk_size = pick(request.prefill_chunk_size, model.prefill_chunk_size, default_prefill_chunk_size);
  SHARDLM_CHECK(resolved.prefill_chunk_size > 0, "prefill_chunk_size must be positive, got ",
                resolved.prefill_chunk_size);

  if (request.max_new_tokens || (!request.max_length && model.max_new_tokens)) {
    resolved.max_new_tokens = pick(request.max_new_tokens, model.max_new_tokens, int64_t{0});
  } else {
    const int64_t max_length = pick(request.max_length, model.max_length, int64_t{20});
    resolved.max_new_tokens = max_length - longest_prompt;
    SHARDLM_CHECK(resolved.max_new_tokens > 0, "the prompt has ", longest_prompt, " tokens and max_length is ",
                  max_length, ": nothing left to generate; set max_new_tokens");
  }
  SHARDLM_CHECK(resolved.max_new_tokens > 0, "max_new_tokens must be positive, got ", resolved.max_new_tokens);
  const int64_t needed = longest_prompt + resolved.max_new_tokens;
  SHARDLM_CHECK(needed <= max_position_embeddings, "the prompt (", longest_prompt, " tokens) plus max_new_tokens (",
                resolved.max_new_tokens, ") is ", needed, " positions, beyond the model's max_position_embeddings (",
                max_position_embeddings, "): shorten the prompt or lower max_new_tokens");
  resolved.max_cache_len = request.max_cache_len;
  SHARDLM_CHECK(!request.max_cache_len || *request.max_cache_len >= needed, "max_cache_len ",
                request.max_cache_len.value_or(0), " cannot hold the prompt (", longest_prompt,
                " tokens) plus max_new_tokens (", resolved.max_new_tokens, "): raise it to ", needed);
  const std::string implementation = request.cache_implementation.value_or("static");
  SHARDLM_CHECK(implementation == "static", "cache_implementation '", implementation,
                "' is not supported: shardlm uses a static cache (\"static\")");
  return resolved;
}

Generator::Generator(const models::CausalLM& model, backends::Backend& backend, GenerationConfig model_defaults)
    : model_(model), model_defaults_(std::move(model_defaults)), runner_(model, backend) {}

void Generator::size_cache(int64_t batch, const ResolvedGeneration& settings, int64_t longest_prompt) {
  if (settings.max_cache_len) {
    runner_.prepare_cache(batch, *settings.max_cache_len);
  } else {
    runner_.ensure_cache(batch, longest_prompt + settings.max_new_tokens);
  }
}

namespace {

SequenceRequest request_for(std::vector<int64_t> prompt, const ResolvedGeneration& settings, uint64_t seed,
                            const tokenizer::Tokenizer* text_tokenizer) {
  return {.prompt = std::move(prompt),
          .sampling = settings.sampling,
          .seed = seed,
          .stop = {.max_new_tokens = settings.max_new_tokens,
                   .eos_token_id = settings.eos_token_id,
                   .stop_strings = settings.stop_strings},
          .tokenizer = text_tokenizer};
}

}  // namespace

void Generator::compile_ahead(int64_t batch, const GenerationConfig& request) {
  SHARDLM_CHECK(batch > 0, "compile ahead: the batch size must be positive, not ", batch);
  const ResolvedGeneration settings =
      resolve_generation(model_defaults_, request, 1, model_.config().max_position_embeddings);
  SHARDLM_CHECK(settings.compile, "compile ahead: compilation is disabled (disable_compile / --no-compile)");
  runner_.set_execution({true, settings.prefill_chunk_size});
  size_cache(batch, settings, 1);
  runner_.buffers("prefill", batch, settings.prefill_chunk_size, batch);
  const SequenceRequest typical = request_for({0}, settings, 0, nullptr);
  runner_.buffers("decode", batch, 1, batch,
                  candidate_count(typical, runner_.backend().max_top_k(), model_.config().vocab_size));
}

std::vector<GenerationResult> Generator::generate(const std::vector<std::vector<int64_t>>& prompts,
                                                  const GenerationConfig& request, const TokenCallback& on_token,
                                                  const tokenizer::Tokenizer* text_tokenizer) {
  SHARDLM_CHECK(!prompts.empty(), "generate: no prompts given");
  int64_t longest = 0;
  for (const auto& prompt : prompts) {
    SHARDLM_CHECK(!prompt.empty(), "the prompt is empty: generation needs at least one token (e.g. BOS)");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
  }
  const ResolvedGeneration settings =
      resolve_generation(model_defaults_, request, longest, model_.config().max_position_embeddings);
  SHARDLM_CHECK(settings.stop_strings.empty() || text_tokenizer, "stop strings need a tokenizer");
  runner_.set_execution({settings.compile, settings.prefill_chunk_size});
  const int64_t batch = static_cast<int64_t>(prompts.size());
  size_cache(batch, settings, longest);

  const int64_t compiles_before = compiles();
  stats_ = {};
  const auto start = std::chrono::steady_clock::now();
  // One slot a prompt and no token budget: every prompt prefills at once, as one batch.
  Engine engine(runner_, {});
  int64_t first_tokens = 0;
  for (size_t r = 0; r < prompts.size(); ++r) {
    // Row r samples with seed + r: a prompt repeated in a batch gives different samples,
    // and row 0 reproduces the prompt generated alone with the same seed.
    engine.add(request_for(prompts[r], settings, settings.seed + r, text_tokenizer),
               [&, r](const Sequence& sequence, int64_t token, std::string_view text) {
                 if (sequence.generated().size() == 1 && ++first_tokens == batch)
                   stats_.time_to_first_token_s =
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                 if (on_token) on_token(r, token, text);
               });
  }
  while (!engine.idle()) engine.step();

  const EngineStats& ran = engine.stats();
  stats_.prefill_tokens = ran.prefill_tokens;
  stats_.prefill_s = ran.prefill_s;
  stats_.prefill_communication_s = ran.prefill_communication_s;
  stats_.decode_tokens = ran.decode_tokens;
  stats_.decode_s = ran.decode_s;
  stats_.decode_communication_s = ran.decode_communication_s;
  stats_.decode_collectives = ran.decode_collectives;
  stats_.compiles = compiles() - compiles_before;
  std::vector<GenerationResult> results(prompts.size());
  for (const auto& sequence : engine.finished()) {
    const auto generated = sequence->generated();
    results[sequence->id()] = {.generated = {generated.begin(), generated.end()},
                               .finish_reason = *sequence->finish_reason()};
  }
  return results;
}

}  // namespace shardlm::generation
