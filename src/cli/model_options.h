#pragma once
// Options that several commands share: which model to load and how, and how to
// sample. Each command adds them to its own CLI11 subcommand.

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/impl.h"

namespace shardlm::cli {

struct ModelArguments {
  std::string model{io::default_model_id};
  std::string revision = "main";
  std::string dtype, device = "cpu", quantize, kv_cache_dtype;
  int threads = 0;
  bool verbose = false, mmap_weights = false;
  int tp_size = 1;
  std::string tp_plan_file;
  double collective_timeout = DistributedConfig{}.collective_timeout_seconds;
  std::string pjrt_plugin, compile_cache;
  std::string topology;  // set by `shardlm compile --topology` only
};

struct SamplingArguments {
  std::optional<int64_t> max_new_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::optional<int64_t> max_cache_len, prefill_chunk;
  bool greedy = false, sample = false, no_compile = false;
  std::vector<std::string> stop;
};

void add_model_options(CLI::App& command, ModelArguments& args);
void add_sampling_options(CLI::App& command, SamplingArguments& args);
GenerationConfig to_generation_config(const SamplingArguments& args);

struct LoadedModel {
  io::ModelFiles files;
  std::optional<AutoTokenizer> tokenizer;  // when the checkpoint has tokenizer.json
  AutoModelForCausalLM model;
  bool prints_output() const { return model.tp_rank() == 0; }
};
// What a command needs of the files and tokenizer, checked before any weight is read: a
// missing tokenizer fails at once, not after a load of minutes. Throws to refuse.
using FilesCheck = std::function<void(const io::ModelFiles& files, const std::optional<AutoTokenizer>& tokenizer)>;
// Resolves the model once (a model id costs one round of hub requests), then loads
// the tokenizer (if any), runs `check`, and loads the weights from the same files. Under
// tensor parallelism only rank 0 keeps stdout: the other ranks' generated text goes nowhere.
LoadedModel load_model(const ModelArguments& args, const FilesCheck& check = {});

}  // namespace shardlm::cli
