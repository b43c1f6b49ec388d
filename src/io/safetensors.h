#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then
// the data section. The header is validated completely before any tensor is
// handed out, because checkpoints come from strangers.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/model_files.h"

namespace shardlm::io {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets inside the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // `source_name` is the path shown in errors.
  static SafetensorsFile parse(ByteRegion region, std::string source_name);
  static SafetensorsFile open(const std::string& path);

  const std::string& source_name() const { return source_name_; }
  bool contains(const std::string& name) const { return tensors_.contains(name); }
  const TensorInfo& info(const std::string& name) const;
  // A zero-copy, read-only view of the tensor's bytes.
  Tensor tensor(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string source_name_;
  ByteRegion region_;
  const std::byte* data_section_ = nullptr;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (host, any dtype) to `path` atomically: a temporary file renamed into place.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

class GgufWeights;

// A checkpoint's weights: model.safetensors, or the shards listed by
// model.safetensors.index.json (every shard mapped once), or a GGUF file (io/gguf_model.h:
// its tensors under transformers' names, decoded to float32 as they are read).
class Checkpoint {
 public:
  static Checkpoint open(const ModelFiles& files);

  bool contains(const std::string& name) const;
  // Throws naming the tensor and checkpoint if missing.
  Tensor tensor(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;
  // A GGUF file (its tensors come as GgufWeights gives them), not safetensors.
  bool from_gguf() const { return gguf_ != nullptr; }

 private:
  const SafetensorsFile& shard_for(const std::string& name) const;
  const std::string& stored_name(const std::string& name) const;
  // A multimodal checkpoint (Gemma3ForConditionalGeneration) holds the text model under
  // language_model.model. (model.language_model. in some files) and language_model.lm_head.:
  // they are named as the text model's own, and the other towers are left out.
  void keep_only_the_text_model();

  std::string location_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shard_of_;
  std::map<std::string, std::string> stored_names_;  // where a name differs from the file's
  std::shared_ptr<const GgufWeights> gguf_;
};

}  // namespace shardlm::io
