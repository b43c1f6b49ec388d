#include <shardlm/auto_model.h>
#include <shardlm/shardlm.h>

#include "api/impl.h"
#include "core/logging.h"

namespace shardlm {

namespace api {
AutoTokenizer::Impl load_tokenizer(const io::ModelFiles& files) {
  if (!files.exists("tokenizer.json"))
    fail(files.path_of("tokenizer.json"), " not found: this checkpoint has no tokenizer; pass token ids instead");
  return {tokenizer::Tokenizer::from_json(files.read_text("tokenizer.json"), files.path_of("tokenizer.json"))};
}
}  // namespace api

AutoModelForCausalLM AutoModelForCausalLM::from_pretrained(const std::string& path_or_id,
                                                           const PretrainedOptions& options) {
  io::ModelFiles files = io::resolve_model(path_or_id);
  auto impl = std::make_shared<Impl>();
  impl->config = io::load_model_config(files);
  impl->backend = backends::create_backend(options.device_map);
  impl->checkpoint = io::Checkpoint::open(files);
  impl->model = models::create_causal_lm(impl->config, impl->checkpoint, {.dtype = options.dtype});
  impl->generator = std::make_unique<generation::Generator>(*impl->model, *impl->backend,
                                                            io::load_generation_config(files, impl->config));
  log::info(str_cat("loaded ", impl->config.architectures.front(), " from ", files.location(), " on ",
                    impl->backend->name(), ": ", impl->model->weight_bytes(), " weight bytes"));
  return AutoModelForCausalLM(std::move(impl));
}

std::vector<std::vector<int64_t>> AutoModelForCausalLM::generate(const BatchEncoding& inputs,
                                                                 const GenerationConfig& config,
                                                                 const TokenStreamer& streamer,
                                                                 const AutoTokenizer* tokenizer) {
  const tokenizer::Tokenizer* text_tokenizer = tokenizer ? &tokenizer->impl().tokenizer : nullptr;
  std::vector<std::vector<int64_t>> outputs;
  for (size_t row = 0; row < inputs.input_ids.size(); ++row) {
    const std::vector<int64_t>& prompt = inputs.input_ids[row];
    generation::GenerationResult result = impl_->generator->generate(prompt, config, streamer, text_tokenizer);
    std::vector<int64_t> sequence = prompt;
    sequence.insert(sequence.end(), result.generated.begin(), result.generated.end());
    outputs.push_back(std::move(sequence));
  }
  return outputs;
}

std::vector<std::vector<float>> AutoModelForCausalLM::logits(const std::vector<int64_t>& input_ids) {
  impl_->generator->prepare_cache(static_cast<int64_t>(input_ids.size()));
  Tensor logits = impl_->generator->forward(input_ids, 0, /*all_positions=*/true);
  const int64_t vocab = logits.shape()[1];
  std::vector<std::vector<float>> rows;
  for (int64_t r = 0; r < logits.shape()[0]; ++r)
    rows.emplace_back(logits.data<float>() + r * vocab, logits.data<float>() + (r + 1) * vocab);
  return rows;
}

const GenerationConfig& AutoModelForCausalLM::generation_config() const {
  return impl_->generator->model_defaults();
}
std::string AutoModelForCausalLM::architecture() const { return impl_->config.architectures.front(); }
std::string AutoModelForCausalLM::device() const { return impl_->backend->device().to_string(); }
size_t AutoModelForCausalLM::weight_bytes() const { return impl_->model->weight_bytes(); }

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
