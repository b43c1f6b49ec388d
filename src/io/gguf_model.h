#pragma once
// A GGUF file as a checkpoint: the config.json its metadata implies and its tensors
// under transformers' names, as llama.cpp's convert_hf_to_gguf.py wrote them (llama.cpp's
// names and metadata keys; for Llama, q_proj and k_proj rows permuted into interleaved
// rope pairs, which are put back; for Gemma 3, norms stored as 1 + weight, which are
// shifted back). Architectures: llama, qwen2, qwen3, gemma3. Its vocabulary: gguf_vocabulary.h.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"

namespace shardlm::io {

// config.json's text for the file's architecture and hyper-parameters.
std::string gguf_config_json(const GgufFile& file);

// The tensors of a GGUF file by transformers' names, as the CPU kernels read them
// (GgufFile::weight): the stored blocks, or the same values with the scales apart.
class GgufWeights {
 public:
  explicit GgufWeights(std::shared_ptr<const GgufFile> file);

  bool contains(const std::string& name) const { return sources_.contains(name); }
  // GgufFile::weight (a view of the file, or a copy where the converter permuted its rows
  // or a Gemma norm is stored as 1 + weight, which comes back float32).
  Tensor tensor(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  struct Source {
    std::string gguf_name;
    int64_t permuted_heads = 0;  // Llama's q/k rows: the heads they were permuted over; 0: as stored
    float shift = 0;             // added to every value: Gemma's norms are stored as 1 + transformers' weight
  };
  const Source& source(const std::string& name) const;

  std::shared_ptr<const GgufFile> file_;
  std::map<std::string, Source> sources_;
  std::map<std::string, TensorInfo> infos_;
};

}  // namespace shardlm::io
