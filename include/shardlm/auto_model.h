#pragma once
// shardlm::AutoModelForCausalLM: a checkpoint directory loaded onto a device,
// generating with a static KV cache, used like transformers' class of that name.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <shardlm/auto_tokenizer.h>
#include <shardlm/dtype.h>
#include <shardlm/export.h>
#include <shardlm/generation_config.h>

namespace shardlm {

// Tensor parallelism as transformers' DistributedConfig: one process per device, started
// by `shardlm launch` or mpirun, each loading only its shard of every split weight.
struct DistributedConfig {
  // Processes the model is split over; must equal the job's process count.
  int tp_size = 1;
  // Rules over the architecture's default plan: a parameter or module name, layer indices
  // written as `*` ("model.layers.*.self_attn.q_proj"), to a style ("colwise", "rowwise",
  // "colwise_gather_output", "rowwise_split_input", "replicate", "embedding_rowwise",
  // "packed_colwise", "packed_rowwise", or transformers' aliases "colwise_rep",
  // "rowwise_rep", "replicated_with_grad_allreduce").
  std::map<std::string, std::string> tp_plan{};
  // A collective of a forward pass that waits longer than this ends the job with a
  // message naming the rank and its host: over TCP a lost host or link is otherwise
  // silent and the job would hang. Ranks of one step wait for each other for
  // milliseconds; 0 waits forever.
  double collective_timeout_seconds = 20;
};

struct PretrainedOptions {
  // Convert weights to this dtype while loading; unset keeps the stored dtype.
  // Activations are computed in float32.
  std::optional<DType> dtype{};
  // On the CPU, weights used as stored are copied out of the memory-mapped checkpoint
  // into huge-page memory, 16 MB at a time with each part's file pages released behind
  // it (so the process holds the weights once): decode streams every weight per token,
  // and 4 KB file pages cost a TLB miss each (bf16 decode ~20% faster on a 2-core VM).
  // true keeps them mapped instead: instant load, pages shared with other processes.
  bool memory_map_weights = false;
  // "cpu", "cuda", "cuda:N", "tpu", "tpu:N", "pjrt", "pjrt:N" (any PJRT plugin), or "auto"
  // (a TPU if libtpu finds chips, else a GPU, else the CPU; says which and why).
  std::string device_map = "cpu";
  // tpu/pjrt: the PJRT plugin library; empty: SHARDLM_PJRT_PLUGIN (pjrt), TPU_LIBRARY_PATH or
  // Python's libtpu package (tpu) (docs/PJRT.md).
  std::string pjrt_plugin{};
  // tpu/pjrt: the directory of compiled programs kept across processes; empty: the default
  // ($SHARDLM_COMPILE_CACHE, else ~/.cache/shardlm/pjrt); "none": compile every process.
  std::string compile_cache_dir{};
  // tpu/pjrt: compile for these devices without having them (libtpu: "v5e:2x2"): programs go
  // into the compile cache only and nothing runs (compile_ahead; docs/PJRT.md).
  std::string pjrt_topology{};
  // For a model id: a branch, tag or commit hash.
  std::string revision = "main";
  // CPU threads for the kernels; 0 uses one per hardware thread.
  int threads = 0;
  // "int8": quantize every [out, in] weight whose rows are whole 32-element blocks to
  // int8 with one float16 scale per block (as llama.cpp's Q8_0) while loading; "int4": to
  // four-bit values with one float16 scale per block (Q4_0's size, chosen for least error),
  // on the CPU only. Empty: as stored (checkpoints written by `shardlm quantize` load
  // quantized either way).
  std::string quantize{};
  // The KV cache's element type, float32 or bfloat16; unset: bfloat16 for 16-bit or
  // int8 weights (half the cache memory), float32 for float32 weights.
  std::optional<DType> kv_cache_dtype{};
  // Tensor parallelism; unset (or tp_size 1): the whole model in this process.
  std::optional<DistributedConfig> distributed_config{};
};

// Called for every generated token of input row `row` with the text it completes
// (empty without a tokenizer, or while a UTF-8 character is incomplete).
using TokenStreamer = std::function<void(size_t row, int64_t token, std::string_view text)>;

class SHARDLM_API AutoModelForCausalLM {
 public:
  // A checkpoint directory (config.json, model.safetensors or its index), a model id
  // ("org/name") found in or downloaded to the Hugging Face cache (docs/HUB.md), or
  // "embedded:stories260K" for the built-in model.
  static AutoModelForCausalLM from_pretrained(const std::string& path_or_id, const PretrainedOptions& options = {});

  // One output row per input row: the input row as given followed by its generated
  // tokens (rows that stop early are shorter; nothing is padded). Rows of different
  // lengths run as one batch; attention_mask (when given) marks padding to drop, so
  // each row generates exactly as it would alone. `tokenizer` enables stop_strings
  // and streamed text.
  std::vector<std::vector<int64_t>> generate(const BatchEncoding& inputs, const GenerationConfig& config = {},
                                             const TokenStreamer& streamer = {},
                                             const AutoTokenizer* tokenizer = nullptr);

  // Logits for every position of `input_ids` (a fresh sequence): [positions][vocab].
  std::vector<std::vector<float>> logits(const std::vector<int64_t>& input_ids);

  // Compiles ahead of time, without generating, the executables that generate() with
  // `config` needs for each batch size (one prefill chunk and one decode step each). On
  // pjrt/tpu they land in the compile cache, so a later process compiles none of them.
  void compile_ahead(const std::vector<int64_t>& batch_sizes, const GenerationConfig& config = {});

  // Compiles so far, and the timings of the last generate() call.
  int64_t compiles() const;
  struct Stats {
    double time_to_first_token_s = 0, prefill_tokens_per_s = 0, decode_tokens_per_s = 0;
    int64_t compiles = 0;
    size_t arena_bytes = 0, kv_cache_bytes = 0;
    // Seconds of this rank in tensor-parallel collectives, during prefill and decode.
    double prefill_communication_s = 0, decode_communication_s = 0;
    int64_t decode_collectives = 0;  // tensor-parallel collectives of the decode steps
    int64_t decode_tokens = 0;
    // Whole programs the backend compiled, or loaded from its on-disk compile cache, in
    // this process so far (pjrt/tpu; 0 elsewhere).
    int64_t programs_compiled = 0, programs_loaded = 0;
  };
  Stats last_stats() const;

  // The model's generation_config.json (and config.json token ids).
  const GenerationConfig& generation_config() const;
  std::string architecture() const;
  std::string device() const;
  // Bytes of the weights as loaded (after any dtype conversion or quantization); under
  // tensor parallelism, this rank's.
  size_t weight_bytes() const;
  // The KV cache's element type (float32 or bfloat16), as given or defaulted at load.
  DType kv_cache_dtype() const;
  // This process's rank in the tensor-parallel group and the group's size (0 and 1 alone).
  int tp_rank() const;
  int tp_size() const;

  struct Impl;  // what the handle holds (opaque here)

 private:
  friend struct detail::Access;
  explicit AutoModelForCausalLM(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace shardlm
