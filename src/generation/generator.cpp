#include "generation/generator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
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

// Like llama.cpp's default context: one cache (so one set of executables) serves every
// request up to this length. Its pages cost memory only once written.
constexpr int64_t default_max_cache_len = 4096;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// How many of each row's best logits decide its next token (sampling on the device), or 0
// when the whole row is needed: a repetition penalty reorders logits by history, and
// sampling without top_k reads every token. Sampling fetches one more than top_k, to see
// whether the k-th value ties with the next (torch.topk then keeps both).
int64_t candidate_count(const SamplingSettings& sampling, int64_t max_top_k, int64_t vocab) {
  if (sampling.repetition_penalty != 1.0f) return 0;
  const int64_t count = !sampling.do_sample ? 1 : sampling.top_k > 0 ? sampling.top_k + 1 : 0;
  return count > 0 && count <= max_top_k && count < vocab ? count : 0;
}

// What one row of a batched generation carries between steps.
struct RowState {
  std::vector<int64_t> history;  // prompt + generated
  size_t prompt_length = 0;
  TokenSelector selector;
  std::unique_ptr<tokenizer::IncrementalDecoder> decoder{};
  std::string text{};  // generated text so far (for stop strings)
  GenerationResult result{};
  bool finished = false;
};

}  // namespace

Generator::Generator(const models::CausalLM& model, backends::Backend& backend, GenerationConfig model_defaults)
    : model_(model), backend_(backend), model_defaults_(std::move(model_defaults)) {}

size_t Generator::arena_bytes() const {
  size_t total = 0;
  compiled_.for_each([&](const graph::CompileKey&, const StepSlot& slot) { total += slot.executable->arena_bytes(); });
  return total;
}

void Generator::ensure_cache(int64_t batch, int64_t needed) {
  SHARDLM_CHECK(needed <= model_.config().max_position_embeddings, needed,
                " positions are beyond the model's max_position_embeddings (",
                model_.config().max_position_embeddings, ")");
  if (cache_.batch == batch && cache_.max_cache_len >= needed) return;
  prepare_cache(batch, std::max(needed, std::min(model_.config().max_position_embeddings, default_max_cache_len)));
}

void Generator::prepare_cache(int64_t batch, int64_t max_cache_len) {
  if (cache_.batch == batch && cache_.max_cache_len == max_cache_len) return;
  // Executables bind the cache's tensors: they go with it.
  compiled_.clear();
  eager_slots_.clear();
  cache_ = {};
  cache_ = model_.allocate_cache(backend_, batch, max_cache_len);
}

void Generator::size_cache(int64_t batch, const ResolvedGeneration& settings, int64_t longest_prompt) {
  if (settings.max_cache_len) {
    prepare_cache(batch, *settings.max_cache_len);
  } else {
    ensure_cache(batch, longest_prompt + settings.max_new_tokens);
  }
}

graph::CompileKey Generator::key_for(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                                     int64_t candidates) const {
  return {.phase = phase,
          .batch = batch,
          .tokens_per_step = tokens,
          .logit_rows = logit_rows,
          .candidates = candidates,
          .max_cache_len = cache_.max_cache_len,
          .dtype = DType::f32,
          .device = backend_.device(),
          .compiler = backend_.compiler_identity(),
          .tp_rank = model_.tp_rank(),
          .tp_size = model_.tp_size()};
}

Generator::StepSlot Generator::make_slot(const graph::CompileKey& key) const {
  StepSlot slot;
  slot.host_ids = Tensor::zeros({key.batch, key.tokens_per_step}, DType::i32);
  slot.host_positions = Tensor::zeros({key.batch, key.tokens_per_step}, DType::i32);
  slot.host_cache_rows = Tensor::zeros({key.batch}, DType::i32);
  for (int64_t b = 0; b < key.batch; ++b) slot.host_cache_rows.mutable_data<int32_t>()[b] = static_cast<int32_t>(b);
  slot.host_rows = Tensor::zeros({key.logit_rows}, DType::i32);
  slot.host_logits = Tensor::zeros({key.logit_rows, model_.config().vocab_size}, DType::f32);
  slot.ids = backend_.to_device(slot.host_ids);
  slot.positions = backend_.to_device(slot.host_positions);
  slot.cache_rows = backend_.to_device(slot.host_cache_rows);
  slot.rows = backend_.to_device(slot.host_rows);
  return slot;
}

Generator::StepSlot& Generator::slot(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                                     int64_t candidates) {
  if (!backend_.compiles_graphs() || !execution_.compile) candidates = 0;
  const graph::CompileKey key = key_for(phase, batch, tokens, logit_rows, candidates);
  if (!execution_.compile) {
    auto found = eager_slots_.find(key);
    if (found == eager_slots_.end()) found = eager_slots_.emplace(key, make_slot(key)).first;
    return found->second;
  }
  return compiled_.get(key, [&] {
    StepSlot slot = make_slot(key);
    graph::Builder builder(backend_, graph::BuildMode::record);
    slot.logits = model_.forward(builder, {slot.ids, slot.positions, slot.cache_rows, slot.rows}, cache_);
    std::vector<graph::Value> outputs{slot.logits};
    if (key.candidates > 0) {
      std::tie(slot.best_values, slot.best_ids) = builder.top_k(slot.logits, key.candidates);
      outputs.insert(outputs.end(), {slot.best_values, slot.best_ids});
    }
    slot.executable = graph::compile(builder.take_graph(), outputs, backend_, {.key = key.to_string()});
    return slot;
  });
}

const Tensor& Generator::run_on_device(StepSlot& slot) {
  backend_.copy_from_host(slot.host_ids, slot.ids);
  backend_.copy_from_host(slot.host_positions, slot.positions);
  backend_.copy_from_host(slot.host_cache_rows, slot.cache_rows);
  backend_.copy_from_host(slot.host_rows, slot.rows);
  if (slot.executable) {
    slot.executable->run(backend_);
    return slot.executable->tensor(slot.logits);
  }
  graph::Builder builder(backend_, graph::BuildMode::eager);
  graph::Value logits = model_.forward(builder, {slot.ids, slot.positions, slot.cache_rows, slot.rows}, cache_);
  slot.eager_logits = builder.tensor(logits);
  return slot.eager_logits;
}

const Tensor& Generator::run(StepSlot& slot) {
  backend_.copy_to_host(run_on_device(slot), slot.host_logits);
  return slot.host_logits;
}

const Tensor& Generator::run_to_candidates(StepSlot& slot, int64_t count) {
  if (!slot.candidate_values.defined() || slot.candidate_values.shape()[1] != count) {
    const Shape shape{slot.host_rows.numel(), count};
    slot.host_candidate_values = Tensor::zeros(shape, DType::f32);
    slot.host_candidate_ids = Tensor::zeros(shape, DType::i32);
    slot.candidate_values = backend_.to_device(slot.host_candidate_values);
    slot.candidate_ids = backend_.to_device(slot.host_candidate_ids);
  }
  const Tensor& logits = run_on_device(slot);
  if (slot.best_values.defined()) {  // computed by the step's program
    backend_.copy_to_host(slot.executable->tensor(slot.best_values), slot.host_candidate_values);
    backend_.copy_to_host(slot.executable->tensor(slot.best_ids), slot.host_candidate_ids);
    return logits;
  }
  backend_.top_k(logits, slot.candidate_values, slot.candidate_ids);
  backend_.copy_to_host(slot.candidate_values, slot.host_candidate_values);
  backend_.copy_to_host(slot.candidate_ids, slot.host_candidate_ids);
  return logits;
}

Tensor Generator::forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions) {
  const int64_t count = static_cast<int64_t>(ids.size()), vocab = model_.config().vocab_size;
  SHARDLM_CHECK(count > 0 && start_position + count <= cache_.max_cache_len && cache_.batch == 1, "positions up to ",
                start_position + count, " do not fit the batch-1 KV cache of ", cache_.max_cache_len);
  for (int64_t id : ids)
    SHARDLM_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  const bool decode = count == 1 && !all_positions;
  const int64_t chunk = decode ? 1 : execution_.prefill_chunk_size;
  StepSlot& step = slot(decode ? "decode" : "prefill", 1, chunk, all_positions ? chunk : 1);
  Tensor logits = Tensor::zeros({all_positions ? count : 1, vocab}, DType::f32);
  for (int64_t begin = 0; begin < count; begin += chunk) {
    const int64_t real = std::min(chunk, count - begin);
    for (int64_t j = 0; j < chunk; ++j) {
      step.host_ids.mutable_data<int32_t>()[j] = j < real ? static_cast<int32_t>(ids[begin + j]) : 0;
      step.host_positions.mutable_data<int32_t>()[j] = j < real ? static_cast<int32_t>(start_position + begin + j) : -1;
    }
    for (int64_t r = 0; r < step.host_rows.numel(); ++r)
      step.host_rows.mutable_data<int32_t>()[r] = static_cast<int32_t>(all_positions ? r : real - 1);
    const Tensor& chunk_logits = run(step);
    if (all_positions) {
      std::memcpy(logits.mutable_data<float>() + begin * vocab, chunk_logits.data<float>(), real * vocab * sizeof(float));
    } else if (begin + chunk >= count) {
      std::memcpy(logits.mutable_data<float>(), chunk_logits.data<float>(), vocab * sizeof(float));
    }
  }
  return logits;
}

std::vector<std::vector<float>> Generator::prefill(const std::vector<std::vector<int64_t>>& prompts) {
  const int64_t batch = static_cast<int64_t>(prompts.size()), chunk = execution_.prefill_chunk_size;
  const int64_t vocab = model_.config().vocab_size;
  int64_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
  StepSlot& step = slot("prefill", batch, chunk, batch);
  std::vector<std::vector<float>> last_logits(batch);
  for (int64_t begin = 0; begin < longest; begin += chunk) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t length = static_cast<int64_t>(prompts[b].size());
      for (int64_t j = 0; j < chunk; ++j) {
        const bool real = begin + j < length;  // rows past their prompt are padding: position -1
        step.host_ids.mutable_data<int32_t>()[b * chunk + j] = real ? static_cast<int32_t>(prompts[b][begin + j]) : 0;
        step.host_positions.mutable_data<int32_t>()[b * chunk + j] = real ? static_cast<int32_t>(begin + j) : -1;
      }
      step.host_rows.mutable_data<int32_t>()[b] =
          static_cast<int32_t>(b * chunk + std::clamp<int64_t>(length - 1 - begin, 0, chunk - 1));
    }
    const Tensor& logits = run(step);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t last = static_cast<int64_t>(prompts[b].size()) - 1;
      if (last >= begin && last < begin + chunk)
        last_logits[b].assign(logits.data<float>() + b * vocab, logits.data<float>() + (b + 1) * vocab);
    }
  }
  return last_logits;
}

void Generator::compile_ahead(int64_t batch, const GenerationConfig& request) {
  SHARDLM_CHECK(batch > 0, "compile ahead: the batch size must be positive, not ", batch);
  const ResolvedGeneration settings =
      resolve_generation(model_defaults_, request, 1, model_.config().max_position_embeddings);
  SHARDLM_CHECK(settings.compile, "compile ahead: compilation is disabled (disable_compile / --no-compile)");
  set_execution({true, settings.prefill_chunk_size});
  size_cache(batch, settings, 1);
  slot("prefill", batch, settings.prefill_chunk_size, batch);
  slot("decode", batch, 1, batch, candidate_count(settings.sampling, backend_.max_top_k(), model_.config().vocab_size));
}

std::vector<GenerationResult> Generator::generate(const std::vector<std::vector<int64_t>>& prompts,
                                                  const GenerationConfig& request, const TokenCallback& on_token,
                                                  const tokenizer::Tokenizer* text_tokenizer) {
  SHARDLM_CHECK(!prompts.empty(), "generate: no prompts given");
  const int64_t vocab = model_.config().vocab_size;
  int64_t longest = 0;
  for (const auto& prompt : prompts) {
    SHARDLM_CHECK(!prompt.empty(), "the prompt is empty: generation needs at least one token (e.g. BOS)");
    for (int64_t id : prompt)
      SHARDLM_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
  }
  const ResolvedGeneration settings =
      resolve_generation(model_defaults_, request, longest, model_.config().max_position_embeddings);
  SHARDLM_CHECK(settings.stop_strings.empty() || text_tokenizer, "stop strings need a tokenizer");
  set_execution({settings.compile, settings.prefill_chunk_size});

  const int64_t batch = static_cast<int64_t>(prompts.size());
  size_cache(batch, settings, longest);

  const int64_t compiles_before = compiles();
  stats_ = {};
  const auto start = std::chrono::steady_clock::now();
  std::vector<RowState> rows;
  rows.reserve(prompts.size());
  for (const auto& prompt : prompts) {
    // Row r samples with seed + r: a prompt repeated in a batch gives different samples,
    // and row 0 reproduces the prompt generated alone with the same seed.
    RowState& row = rows.emplace_back(RowState{.history = prompt,
                                               .prompt_length = prompt.size(),
                                               .selector = TokenSelector(settings.sampling, settings.seed + rows.size())});
    row.history.reserve(prompt.size() + settings.max_new_tokens);
    row.result.generated.reserve(settings.max_new_tokens);
    if (text_tokenizer) {
      row.decoder = std::make_unique<tokenizer::IncrementalDecoder>(*text_tokenizer, /*skip_special_tokens=*/true);
      // The prompt primes the decoder, so the first new token gets its leading space right.
      for (int64_t id : prompt) row.decoder->push(static_cast<int32_t>(id));
    }
  }

  // Selects each unfinished row's next token from its logits (over the whole vocabulary,
  // or over the candidates `ids` when given) and reports it.
  auto advance = [&](size_t r, std::span<float> logits, int64_t step, std::span<const int32_t> ids = {}) {
    RowState& row = rows[r];
    const int64_t selected = row.selector.select(logits, row.history);
    const int64_t token = ids.empty() ? selected : ids[static_cast<size_t>(selected)];
    row.history.push_back(token);
    row.result.generated.push_back(token);
    std::string text = row.decoder ? row.decoder->push(static_cast<int32_t>(token)) : std::string();
    const size_t previous_length = row.text.size();
    row.text += text;
    std::optional<FinishReason> finish;
    if (std::find(settings.eos_token_id.begin(), settings.eos_token_id.end(), token) != settings.eos_token_id.end()) {
      finish = FinishReason::eos;
    } else if (completes_stop_string(row.text, previous_length, settings.stop_strings)) {
      finish = FinishReason::stop_string;
    } else if (step + 1 == settings.max_new_tokens) {
      finish = FinishReason::length;
    }
    if (finish && row.decoder) text += row.decoder->flush();
    if (on_token) on_token(r, token, text);
    if (finish) {
      row.result.finish_reason = *finish;
      row.finished = true;
    }
  };

  parallel::ProcessGroup& group = model_.process_group();
  const double communication_before = group.communication_seconds();
  std::vector<std::vector<float>> first_logits = prefill(prompts);
  stats_.prefill_s = seconds_since(start);
  stats_.prefill_communication_s = group.communication_seconds() - communication_before;
  for (const auto& prompt : prompts) stats_.prefill_tokens += static_cast<int64_t>(prompt.size());
  for (size_t r = 0; r < rows.size(); ++r) advance(r, first_logits[r], 0);
  stats_.time_to_first_token_s = seconds_since(start);

  const auto decode_start = std::chrono::steady_clock::now();
  StepSlot* step = nullptr;
  const int64_t candidates = candidate_count(settings.sampling, backend_.max_top_k(), vocab);
  std::vector<std::pair<int32_t, float>> by_id;  // this row's candidates (id, logit)
  std::vector<int32_t> candidate_ids;             // ... sorted by id,
  std::vector<float> candidate_logits;            // and their logits in that order
  for (int64_t step_index = 1; step_index < settings.max_new_tokens; ++step_index) {
    bool any_running = false;
    for (const RowState& row : rows) any_running |= !row.finished;
    if (!any_running) break;
    if (!step) step = &slot("decode", batch, 1, batch, candidates);
    for (int64_t b = 0; b < batch; ++b) {
      const RowState& row = rows[b];
      // Finished rows ride along as padding (position -1): no cache writes, no attention work.
      step->host_ids.mutable_data<int32_t>()[b] = row.finished ? 0 : static_cast<int32_t>(row.history.back());
      step->host_positions.mutable_data<int32_t>()[b] =
          row.finished ? -1 : static_cast<int32_t>(row.history.size() - 1);
      step->host_rows.mutable_data<int32_t>()[b] = static_cast<int32_t>(b);
    }
    if (candidates == 0) {
      const Tensor& logits = run(*step);
      for (int64_t b = 0; b < batch; ++b) {
        if (rows[b].finished) continue;
        advance(static_cast<size_t>(b), std::span(logits.mutable_data<float>() + b * vocab, vocab), step_index);
        ++stats_.decode_tokens;
      }
      continue;
    }
    const Tensor& device_logits = run_to_candidates(*step, candidates);
    bool whole_rows_copied = false;
    for (int64_t b = 0; b < batch; ++b) {
      if (rows[b].finished) continue;
      const float* values = step->host_candidate_values.data<float>() + b * candidates;
      const int32_t* ids = step->host_candidate_ids.data<int32_t>() + b * candidates;
      const int64_t kept = settings.sampling.do_sample ? candidates - 1 : 1;
      // A tie across the top_k boundary keeps more than top_k tokens; a short row lacks some.
      bool whole_row_needed = kept < candidates && values[kept - 1] == values[kept];
      for (int64_t j = 0; j < candidates; ++j) whole_row_needed |= ids[j] < 0;
      if (whole_row_needed) {
        if (!whole_rows_copied) backend_.copy_to_host(device_logits, step->host_logits);
        whole_rows_copied = true;
        advance(static_cast<size_t>(b), std::span(step->host_logits.mutable_data<float>() + b * vocab, vocab),
                step_index);
      } else {
        // In id order, so that a draw walks the tokens in the order it would over the whole row.
        by_id.clear();
        for (int64_t j = 0; j < kept; ++j) by_id.emplace_back(ids[j], values[j]);
        std::sort(by_id.begin(), by_id.end());
        candidate_ids.clear();
        candidate_logits.clear();
        for (const auto& [id, value] : by_id) candidate_ids.push_back(id), candidate_logits.push_back(value);
        advance(static_cast<size_t>(b), candidate_logits, step_index, candidate_ids);
      }
      ++stats_.decode_tokens;
    }
  }
  stats_.decode_s = seconds_since(decode_start);
  stats_.decode_communication_s =
      group.communication_seconds() - communication_before - stats_.prefill_communication_s;
  stats_.compiles = compiles() - compiles_before;

  std::vector<GenerationResult> results;
  for (RowState& row : rows) results.push_back(std::move(row.result));
  return results;
}

}  // namespace shardlm::generation
