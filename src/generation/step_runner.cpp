#include "generation/step_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "graph/builder.h"

namespace shardlm::generation {

namespace {

// Like llama.cpp's default context: one cache (so one set of executables) serves every
// request up to this length. Its pages cost memory only once written.
constexpr int64_t default_max_cache_len = 4096;

}  // namespace

size_t StepRunner::arena_bytes() const {
  size_t total = 0;
  compiled_.for_each([&](const graph::CompileKey&, const StepBuffers& step) { total += step.executable->arena_bytes(); });
  return total;
}

void StepRunner::ensure_cache(int64_t slots, int64_t needed) {
  SHARDLM_CHECK(needed <= model_.config().max_position_embeddings, needed,
                " positions are beyond the model's max_position_embeddings (",
                model_.config().max_position_embeddings, ")");
  if (cache_.batch == slots && cache_.max_cache_len >= needed) return;
  prepare_cache(slots, std::max(needed, std::min(model_.config().max_position_embeddings, default_max_cache_len)));
}

void StepRunner::prepare_cache(int64_t slots, int64_t max_cache_len) {
  if (cache_.batch == slots && cache_.max_cache_len == max_cache_len) return;
  // Executables bind the cache's tensors: they go with it.
  compiled_.clear();
  eager_.clear();
  if (leading_) {
    graph::CompileKey size;
    size.slots = slots;
    size.max_cache_len = max_cache_len;
    send_plan(PlanCommand::cache, size);
  }
  cache_ = {};
  cache_ = model_.allocate_cache(backend_, slots, max_cache_len);
}

graph::CompileKey StepRunner::key_for(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                                      int64_t candidates) const {
  return {.phase = phase,
          .batch = batch,
          .slots = cache_.batch,
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

StepBuffers StepRunner::make_buffers(const graph::CompileKey& key) const {
  StepBuffers step;
  step.key = key;
  step.host_ids = Tensor::zeros({key.batch, key.tokens_per_step}, DType::i32);
  step.host_positions = Tensor::zeros({key.batch, key.tokens_per_step}, DType::i32);
  step.host_cache_rows = Tensor::zeros({key.batch}, DType::i32);
  for (int64_t b = 0; b < key.batch; ++b) step.cache_row()[b] = static_cast<int32_t>(b);
  step.host_rows = Tensor::zeros({key.logit_rows}, DType::i32);
  step.host_logits = Tensor::zeros({key.logit_rows, model_.config().vocab_size}, DType::f32);
  step.ids = backend_.to_device(step.host_ids);
  step.positions = backend_.to_device(step.host_positions);
  step.cache_rows = backend_.to_device(step.host_cache_rows);
  step.rows = backend_.to_device(step.host_rows);
  return step;
}

StepBuffers& StepRunner::buffers(const char* phase, int64_t batch, int64_t tokens, int64_t logit_rows,
                                 int64_t candidates) {
  SHARDLM_CHECK(batch <= cache_.batch, "a step of ", batch, " rows over a cache of ", cache_.batch, " slots");
  if (!backend_.compiles_graphs() || !execution_.compile) candidates = 0;
  const graph::CompileKey key = key_for(phase, batch, tokens, logit_rows, candidates);
  if (!execution_.compile) {
    auto found = eager_.find(key);
    if (found == eager_.end()) found = eager_.emplace(key, make_buffers(key)).first;
    return found->second;
  }
  return compiled_.get(key, [&] {
    if (leading_) send_plan(PlanCommand::compile, key);
    StepBuffers step = make_buffers(key);
    graph::Builder builder(backend_, graph::BuildMode::record);
    step.logits = model_.forward(builder, {step.ids, step.positions, step.cache_rows, step.rows}, cache_);
    std::vector<graph::Value> outputs{step.logits};
    if (key.candidates > 0) {
      std::tie(step.best_values, step.best_ids) = builder.top_k(step.logits, key.candidates);
      outputs.insert(outputs.end(), {step.best_values, step.best_ids});
    }
    step.executable = graph::compile(builder.take_graph(), outputs, backend_, {.key = key.to_string()});
    // Ranks compile at their own pace (a persistent compile cache may hold the program on
    // one host only): they meet here, where the collective watchdog does not look, so the
    // step's first collective never waits out another rank's compile.
    if (model_.process_group().size() > 1) model_.process_group().barrier();
    return step;
  });
}

const Tensor& StepRunner::run_on_device(StepBuffers& step) {
  if (leading_) {
    send_plan(PlanCommand::run, step.key);
    parallel::ProcessGroup& group = model_.process_group();
    for (const Tensor* input : {&step.host_ids, &step.host_positions, &step.host_cache_rows, &step.host_rows})
      group.broadcast(*input, 0);
  }
  backend_.copy_from_host(step.host_ids, step.ids);
  backend_.copy_from_host(step.host_positions, step.positions);
  backend_.copy_from_host(step.host_cache_rows, step.cache_rows);
  backend_.copy_from_host(step.host_rows, step.rows);
  if (step.executable) {
    step.executable->run(backend_);
    return step.executable->tensor(step.logits);
  }
  graph::Builder builder(backend_, graph::BuildMode::eager);
  graph::Value logits = model_.forward(builder, {step.ids, step.positions, step.cache_rows, step.rows}, cache_);
  step.eager_logits = builder.tensor(logits);
  return step.eager_logits;
}

const Tensor& StepRunner::run(StepBuffers& step) {
  backend_.copy_to_host(run_on_device(step), step.host_logits);
  return step.host_logits;
}

const Tensor& StepRunner::run_to_candidates(StepBuffers& step, int64_t count) {
  if (!step.candidate_values.defined() || step.candidate_values.shape()[1] != count) {
    const Shape shape{step.host_rows.numel(), count};
    step.host_candidate_values = Tensor::zeros(shape, DType::f32);
    step.host_candidate_ids = Tensor::zeros(shape, DType::i32);
    step.candidate_values = backend_.to_device(step.host_candidate_values);
    step.candidate_ids = backend_.to_device(step.host_candidate_ids);
  }
  const Tensor& logits = run_on_device(step);
  if (step.best_values.defined()) {  // computed by the step's program
    backend_.copy_to_host(step.executable->tensor(step.best_values), step.host_candidate_values);
    backend_.copy_to_host(step.executable->tensor(step.best_ids), step.host_candidate_ids);
    return logits;
  }
  backend_.top_k(logits, step.candidate_values, step.candidate_ids);
  backend_.copy_to_host(step.candidate_values, step.host_candidate_values);
  backend_.copy_to_host(step.candidate_ids, step.host_candidate_ids);
  return logits;
}

Tensor StepRunner::forward(std::span<const int64_t> ids, int64_t start_position, bool all_positions) {
  const int64_t count = static_cast<int64_t>(ids.size()), vocab = model_.config().vocab_size;
  SHARDLM_CHECK(count > 0 && start_position + count <= cache_.max_cache_len && cache_.batch == 1, "positions up to ",
                start_position + count, " do not fit the batch-1 KV cache of ", cache_.max_cache_len);
  for (int64_t id : ids)
    SHARDLM_CHECK(id >= 0 && id < vocab, "token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  const bool decode = count == 1 && !all_positions;
  const int64_t chunk = decode ? 1 : execution_.prefill_chunk_size;
  StepBuffers& step = buffers(decode ? "decode" : "prefill", 1, chunk, all_positions ? chunk : 1);
  Tensor logits = Tensor::zeros({all_positions ? count : 1, vocab}, DType::f32);
  for (int64_t begin = 0; begin < count; begin += chunk) {
    const int64_t real = std::min(chunk, count - begin);
    for (int64_t j = 0; j < chunk; ++j) {
      step.ids_of(0)[j] = j < real ? static_cast<int32_t>(ids[begin + j]) : 0;
      step.positions_of(0)[j] = j < real ? static_cast<int32_t>(start_position + begin + j) : -1;
    }
    for (int64_t r = 0; r < step.host_rows.numel(); ++r)
      step.logit_row()[r] = static_cast<int32_t>(all_positions ? r : real - 1);
    const Tensor& chunk_logits = run(step);
    if (all_positions) {
      std::memcpy(logits.mutable_data<float>() + begin * vocab, chunk_logits.data<float>(), real * vocab * sizeof(float));
    } else if (begin + chunk >= count) {
      std::memcpy(logits.mutable_data<float>(), chunk_logits.data<float>(), vocab * sizeof(float));
    }
  }
  return logits;
}

}  // namespace shardlm::generation
