#include <shardlm/auto_model.h>
#include <shardlm/shardlm.h>

#include "api/impl.h"
#include "core/logging.h"

namespace shardlm {

namespace api {
AutoTokenizer::Impl load_tokenizer(const io::ModelFiles& files) {
  if (!files.exists("tokenizer.json"))
    fail(files.path_of("tokenizer.json"), " not found: this checkpoint has no tokenizer; pass token ids instead");
  const std::string config = "tokenizer_config.json";
  const bool has_config = files.exists(config);
  AutoTokenizer::Impl impl{tokenizer::PretrainedTokenizer::from_texts(
                               files.read_text("tokenizer.json"), files.path_of("tokenizer.json"),
                               has_config ? files.read_text(config) : std::string(), files.path_of(config)),
                           std::nullopt};
  if (const std::optional<std::string>& source = impl.pretrained.config().chat_template)
    impl.chat_template = tokenizer::ChatTemplate::parse(*source, files.path_of(config) + " chat_template");
  return impl;
}
}  // namespace api

AutoModelForCausalLM AutoModelForCausalLM::from_pretrained(const std::string& path_or_id,
                                                           const PretrainedOptions& options) {
  if (options.dtype && !is_floating(*options.dtype))
    fail("dtype ", dtype_name(*options.dtype), " cannot hold weights: use float32, bfloat16 or float16");
  if (!options.quantize.empty() && options.quantize != "int8" && options.quantize != "int4")
    fail("quantize '", options.quantize, "' is not supported: use \"int8\", \"int4\" or leave it empty");
  // On a PJRT device tensor parallelism is one SPMD program over the plugin's devices, in
  // this one process; elsewhere one process per rank.
  const bool spmd = (options.device_map.starts_with("pjrt") || options.device_map.starts_with("tpu")) &&
                    options.distributed_config && options.distributed_config->tp_size > 1;
  parallel::TensorParallel tensor_parallel =
      spmd ? parallel::TensorParallel{} : api::join_tensor_parallel(options.distributed_config);
  if (spmd && parallel::launched_by_mpi() && parallel::world_process_group()->size() > 1)
    fail("--device ", options.device_map, " runs tensor parallelism as one process driving ",
         options.distributed_config->tp_size, " devices: start it once, without shardlm launch or mpirun");
  parallel::TpPlan spmd_plan;
  if (spmd) spmd_plan = parallel::TpPlan(options.distributed_config->tp_plan, "tp_plan");
  auto impl = std::make_shared<Impl>();
  // Under tensor parallelism a failure on one rank (a file missing on one host) must end
  // every rank with its message, not leave the others waiting in a collective.
  api::on_every_rank(tensor_parallel.group.get(), [&] {
    io::ModelFiles files = io::resolve_model(path_or_id, {.revision = options.revision});
    impl->config = io::load_model_config(files);
    const int ranks_on_host = tensor_parallel.group ? tensor_parallel.group->local_size() : 1;
    const int threads = api::default_threads(options.threads, ranks_on_host);
    impl->backend = backends::create_backend(
        api::rank_device(options.device_map, tensor_parallel.group.get()),
        {.threads = threads,
         .pjrt_plugin = options.pjrt_plugin,
         .compile_cache_dir = options.compile_cache_dir,
         .pjrt_topology = options.pjrt_topology,
         .partitions = spmd ? options.distributed_config->tp_size : 1});
    if (tensor_parallel.group) tensor_parallel.group = api::device_process_group(tensor_parallel.group, *impl->backend);
    impl->checkpoint = io::Checkpoint::open(files);
    impl->model = models::create_causal_lm(impl->config, impl->checkpoint,
                                           {.dtype = options.dtype,
                                            .copy_mapped_weights = !options.memory_map_weights &&
                                                                   impl->backend->device().kind == DeviceKind::cpu,
                                            .quantize_int8 = options.quantize == "int8",
                                            .quantize_int4 = options.quantize == "int4",
                                            .threads = threads,
                                            .kv_cache_dtype = options.kv_cache_dtype,
                                            .device = impl->backend.get(),
                                            .spmd_plan = spmd_plan},
                                           tensor_parallel);
    impl->generator = std::make_unique<generation::Generator>(*impl->model, *impl->backend,
                                                              io::load_generation_config(files, impl->config));
    log::info(str_cat("loaded ", impl->config.architectures.front(), " from ", files.location(), " on ",
                      impl->backend->name(), ": ", impl->model->weight_bytes(), " weight bytes",
                      impl->model->tp_size() > 1 ? str_cat(" (tp rank ", impl->model->tp_rank(), " of ",
                                                           impl->model->tp_size(), ")")
                                                 : std::string()));
  });
  return AutoModelForCausalLM(std::move(impl));
}

std::vector<std::vector<int64_t>> AutoModelForCausalLM::generate(const BatchEncoding& inputs,
                                                                 const GenerationConfig& config,
                                                                 const TokenStreamer& streamer,
                                                                 const AutoTokenizer* tokenizer) {
  SHARDLM_CHECK(inputs.attention_mask.empty() || inputs.attention_mask.size() == inputs.input_ids.size(),
                "attention_mask has ", inputs.attention_mask.size(), " rows but input_ids has ", inputs.input_ids.size());
  std::vector<std::vector<int64_t>> prompts;
  for (size_t row = 0; row < inputs.input_ids.size(); ++row) {
    const std::vector<int64_t>& ids = inputs.input_ids[row];
    if (inputs.attention_mask.empty()) {
      prompts.push_back(ids);
      continue;
    }
    const std::vector<int64_t>& mask = inputs.attention_mask[row];
    SHARDLM_CHECK(mask.size() == ids.size(), "attention_mask row ", row, " has ", mask.size(),
                  " entries but input_ids row has ", ids.size());
    std::vector<int64_t>& prompt = prompts.emplace_back();
    for (size_t i = 0; i < ids.size(); ++i)
      if (mask[i] != 0) prompt.push_back(ids[i]);
  }
  const tokenizer::Tokenizer* text_tokenizer = tokenizer ? &detail::Access::impl(*tokenizer).tokenizer() : nullptr;
  std::vector<generation::GenerationResult> results =
      impl_->generator->generate(prompts, config, streamer, text_tokenizer);
  std::vector<std::vector<int64_t>> outputs;
  for (size_t row = 0; row < results.size(); ++row) {
    std::vector<int64_t> sequence = inputs.input_ids[row];
    sequence.insert(sequence.end(), results[row].generated.begin(), results[row].generated.end());
    outputs.push_back(std::move(sequence));
  }
  return outputs;
}

std::vector<std::vector<float>> AutoModelForCausalLM::logits(const std::vector<int64_t>& input_ids) {
  SHARDLM_CHECK(!input_ids.empty(), "logits: input_ids is empty");
  impl_->generator->ensure_cache(1, static_cast<int64_t>(input_ids.size()));
  Tensor logits = impl_->generator->forward(input_ids, 0, /*all_positions=*/true);
  const int64_t vocab = logits.shape()[1];
  std::vector<std::vector<float>> rows;
  for (int64_t r = 0; r < logits.shape()[0]; ++r)
    rows.emplace_back(logits.data<float>() + r * vocab, logits.data<float>() + (r + 1) * vocab);
  return rows;
}

void AutoModelForCausalLM::compile_ahead(const std::vector<int64_t>& batch_sizes, const GenerationConfig& config) {
  SHARDLM_CHECK(!batch_sizes.empty(), "compile_ahead: no batch sizes given");
  for (int64_t batch : batch_sizes) impl_->generator->compile_ahead(batch, config);
}

int64_t AutoModelForCausalLM::compiles() const { return impl_->generator->compiles(); }

AutoModelForCausalLM::Stats AutoModelForCausalLM::last_stats() const {
  const generation::GenerationStats& stats = impl_->generator->last_stats();
  Stats result;
  result.time_to_first_token_s = stats.time_to_first_token_s;
  result.prefill_tokens_per_s = stats.prefill_s > 0 ? stats.prefill_tokens / stats.prefill_s : 0;
  result.decode_tokens_per_s = stats.decode_s > 0 ? stats.decode_tokens / stats.decode_s : 0;
  result.compiles = stats.compiles;
  result.arena_bytes = impl_->generator->arena_bytes();
  result.kv_cache_bytes = impl_->generator->cache_bytes();
  result.prefill_communication_s = stats.prefill_communication_s;
  result.decode_communication_s = stats.decode_communication_s;
  result.decode_collectives = stats.decode_collectives;
  result.decode_tokens = stats.decode_tokens;
  const backends::ProgramStats programs = impl_->backend->program_stats();
  result.programs_compiled = programs.compiled;
  result.programs_loaded = programs.loaded_from_cache;
  return result;
}

const GenerationConfig& AutoModelForCausalLM::generation_config() const {
  return impl_->generator->model_defaults();
}
std::string AutoModelForCausalLM::architecture() const { return impl_->config.architectures.front(); }
std::string AutoModelForCausalLM::device() const { return impl_->backend->device().to_string(); }
size_t AutoModelForCausalLM::weight_bytes() const { return impl_->model->weight_bytes(); }
DType AutoModelForCausalLM::kv_cache_dtype() const { return impl_->model->kv_cache_dtype(); }
int AutoModelForCausalLM::tp_rank() const { return impl_->model->tp_rank(); }
int AutoModelForCausalLM::tp_size() const { return impl_->model->tp_size(); }

namespace accelerator {
bool is_available() {
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.name != "cpu" && info.available) return true;
  return false;
}
int device_count() {
  int count = 0;
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.name != "cpu" && info.available) count += info.device_count;
  return count;
}
}  // namespace accelerator

}  // namespace shardlm
