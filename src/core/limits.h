#pragma once
// Limits on what a file from a stranger may make shardlm allocate, each checked before
// the allocation and reported with the file, the number asked for and the limit. Each
// sits far above what any real checkpoint needs (docs/FUZZING.md lists them all).

// Also bounded elsewhere: safetensors headers (100 MB, io/safetensors.cpp), chat template
// output, steps and nesting (tokenizer/chat_template.h), and the KV cache against the
// memory available (models/causal_lm.cpp).

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace shardlm::limits {

// config.json, generation_config.json, tokenizer.json, tokenizer_config.json and the
// safetensors index are read whole: the largest real tokenizer.json is about 35 MB.
inline constexpr size_t max_json_file_bytes = size_t{256} << 20;

// Refuses a JSON text file of `bytes` bytes over max_json_file_bytes.
inline void check_json_file_size(const std::string& path, size_t bytes) {
  if (bytes > max_json_file_bytes)
    fail(path, " is ", bytes, " bytes, over the limit of ", max_json_file_bytes,
         " bytes for a JSON file: it is not a real config or tokenizer file");
}

// Token ids index dense tables (id -> token, id -> special), so an id is memory: the
// largest real vocabularies have about 260,000 ids.
inline constexpr int64_t max_token_id = (int64_t{1} << 24) - 1;

// Bytes a new allocation can get without swapping: MemAvailable from /proc/meminfo,
// else the physical memory.
uint64_t available_memory_bytes();

}  // namespace shardlm::limits
