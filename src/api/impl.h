#pragma once
// What the public handles hold. Only src/api and src/cli include this.

#include <shardlm/auto_model.h>
#include <shardlm/auto_tokenizer.h>

#include <memory>

#include "backends/backend.h"
#include "generation/generator.h"
#include "io/model_resolution.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
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

namespace api {
// tokenizer.json of a checkpoint adjusted by tokenizer_config.json, and its chat template.
AutoTokenizer::Impl load_tokenizer(const io::ModelFiles& files);
}  // namespace api

}  // namespace shardlm
