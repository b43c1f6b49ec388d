#pragma once
// GGUF files, llama.cpp's one-file checkpoints (versions 2 and 3): "GGUF", a version, the
// tensor and metadata counts, the metadata (typed key-value pairs, arrays among them), a
// table of tensors (name, dimensions innermost first, ggml type, offset), then, aligned,
// the tensor data. Like safetensors, the whole header is validated before any tensor is
// handed out: every count is bounded by the bytes that could hold it, every tensor lies
// inside the data section, and a type ggml never had is refused.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/ggml_blocks.h"
#include "core/tensor.h"
#include "io/model_files.h"

namespace shardlm::io {

enum class GgufValueType : uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
const char* gguf_value_type_name(GgufValueType type);

struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  // Integers as int64_t (u64 values above its range as uint64_t), floats as double.
  std::variant<int64_t, uint64_t, double, bool, std::string, std::vector<GgufValue>> data;
};

struct GgufTensorInfo {
  std::string name;
  GgmlTypeInfo type;
  std::vector<int64_t> dims;  // ggml's order: dims[0] is the row length (innermost)
  uint64_t offset = 0;        // from the start of the data section
  uint64_t bytes = 0;
  int64_t elements = 0;
  // The shape as transformers sees it: dims reversed ([rows, row length] for a matrix).
  Shape shape() const;
};

class GgufFile {
 public:
  // `source_name` is the path shown in errors.
  static GgufFile parse(ByteRegion region, std::string source_name);
  static GgufFile open(const std::string& path);

  const std::string& source_name() const { return source_name_; }
  uint32_t version() const { return version_; }

  // Metadata. The typed getters throw naming the file and key when it is absent or of
  // another type; integers of any width convert when the value fits.
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  std::string get_string(const std::string& key) const;
  int64_t get_integer(const std::string& key) const;
  double get_number(const std::string& key) const;  // a float or an integer
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<int64_t> get_integers(const std::string& key) const;
  std::vector<double> get_numbers(const std::string& key) const;

  // Tensors, in the file's order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool contains_tensor(const std::string& name) const { return tensor_index_.contains(name); }
  const GgufTensorInfo& tensor_info(const std::string& name) const;
  // The tensor's bytes as stored (blocks, for a quantized type).
  std::span<const std::byte> tensor_bytes(const std::string& name) const;
  // The tensor decoded to a host float32 tensor of shape() (a new allocation); a type
  // shardlm cannot decode is refused naming it and the types it can.
  Tensor dequantized(const std::string& name) const;
  // The tensor as the CPU kernels read it (core/ggml_blocks.h: ggml_weight): a view of the
  // mapped file for F32, F16, BF16, Q4_K and Q6_K; int8 or int4 values with their scales
  // for Q8_0, Q5_0 and Q4_0. Refused as dequantized() refuses.
  Tensor weight(const std::string& name) const;

 private:
  // tensor_info(name), refused where shardlm cannot read its type.
  const GgufTensorInfo& readable_tensor_info(const std::string& name) const;

  std::string source_name_;
  ByteRegion region_;
  uint32_t version_ = 0;
  const std::byte* data_section_ = nullptr;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace shardlm::io
