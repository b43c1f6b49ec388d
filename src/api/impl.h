#pragma once
// What the public handles hold. Only src/api, src/server and src/cli include this.

#include <shardlm/auto_model.h>
#include <shardlm/auto_tokenizer.h>

#include <memory>

#include "backends/backend.h"
#include "generation/generator.h"
#include "io/model_resolution.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "parallel/sharding.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pretrained_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace shardlm {

struct AutoTokenizer::Impl {
  tokenizer::PretrainedTokenizer pretrained;
  std::optional<tokenizer::ChatTemplate> chat_template;
  const tokenizer::Tokenizer& tokenizer() const { return pretrained.tokenizer(); }
};

struct AutoModelForCausalLM::Impl {
  io::ModelConfig config;
  std::unique_ptr<backends::Backend> backend;
  io::Checkpoint checkpoint;  // keeps mapped weights alive
  std::unique_ptr<models::CausalLM> model;
  std::unique_ptr<generation::Generator> generator;
};

namespace detail {
struct Access {
  static AutoModelForCausalLM::Impl& impl(AutoModelForCausalLM& model) { return *model.impl_; }
  static const AutoTokenizer::Impl& impl(const AutoTokenizer& tokenizer) { return *tokenizer.impl_; }
};
}  // namespace detail

namespace api {
// tokenizer.json of a checkpoint adjusted by tokenizer_config.json, and its chat template.
AutoTokenizer::Impl load_tokenizer(const io::ModelFiles& files);

// The world process group and plan for `config`; no group when tp_size is 1. tp_size must
// equal the job's process count. Ranks other than 0 log only warnings and errors unless
// verbose logging is on.
parallel::TensorParallel join_tensor_parallel(const std::optional<DistributedConfig>& config);
// The device this rank drives for `device_map`: under tensor parallelism a bare "cuda" is
// the GPU of this rank's local rank (or the only one it can see).
std::string rank_device(const std::string& device_map, const parallel::ProcessGroup* group);
// The group the model's collectives use on `backend`: `group` itself on the CPU (MPI), an
// NCCL group bootstrapped over it on a GPU.
std::shared_ptr<parallel::ProcessGroup> device_process_group(std::shared_ptr<parallel::ProcessGroup> group,
                                                             backends::Backend& backend);
// `requested` CPU threads, or when 0 this host's hardware threads shared by its ranks
// (`ranks_on_this_host` processes of a tensor-parallel job).
int default_threads(int requested, int ranks_on_this_host);
// Runs `work` on every rank of `group` (or alone when null); when it throws on any rank,
// every rank throws a JobError with the first failing rank's message.
void on_every_rank(parallel::ProcessGroup* group, const std::function<void()>& work);
}  // namespace api

}  // namespace shardlm
