#include "io/safetensors.h"

#include <algorithm>
#include <tuple>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/logging.h"
#include "io/gguf_model.h"

namespace shardlm::io {
namespace {

using nlohmann::json;

// The Rust reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t max_header_bytes = 100'000'000;

struct SafetensorsDType {
  const char* name;
  DType dtype;
};
constexpr SafetensorsDType supported_dtypes[] = {
    {"F32", DType::f32}, {"BF16", DType::bf16}, {"F16", DType::f16}, {"I32", DType::i32},
    {"I64", DType::i64}, {"I8", DType::i8},     {"U8", DType::u8},
};

DType dtype_from_safetensors(const std::string& name, const std::string& where) {
  for (const auto& entry : supported_dtypes)
    if (name == entry.name) return entry.dtype;
  fail(where, ": dtype '", name, "' is not supported (supported: F32, BF16, F16, I32, I64, I8, U8)");
}

const char* dtype_to_safetensors(DType dtype) {
  for (const auto& entry : supported_dtypes)
    if (entry.dtype == dtype) return entry.name;
  fail("dtype ", dtype_name(dtype), " cannot be written to safetensors");
}

uint64_t checked_multiply(uint64_t a, uint64_t b, const std::string& where) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) fail(where, ": shape size overflows");
  return a * b;
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_bytes,
                       const std::string& source) {
  std::string where = str_cat(source, ": tensor '", name, "'");
  if (!entry.is_object()) fail(where, ": header entry is not a JSON object");
  auto dtype = entry.find("dtype");
  auto shape = entry.find("shape");
  auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || !dtype->is_string()) fail(where, ": 'dtype' missing or not a string");
  if (shape == entry.end() || !shape->is_array()) fail(where, ": 'shape' missing or not an array");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    fail(where, ": 'data_offsets' must be [begin, end] with non-negative integers");

  TensorInfo info;
  info.name = name;
  info.dtype = dtype_from_safetensors(dtype->get<std::string>(), where);
  std::vector<int64_t> dims;
  uint64_t elements = 1;
  for (const json& dim : *shape) {
    if (!dim.is_number_unsigned()) fail(where, ": shape ", shape->dump(), " has a non-integer or negative dimension");
    uint64_t value = dim.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail(where, ": dimension too large");
    elements = checked_multiply(elements, value, where);
    dims.push_back(static_cast<int64_t>(value));
  }
  info.shape = Shape(std::move(dims));
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.begin > info.end) fail(where, ": data_offsets [", info.begin, ", ", info.end, "] are reversed");
  if (info.end > data_bytes)
    fail(where, ": data_offsets end ", info.end, " is past the data section (", data_bytes,
         " bytes): the file is truncated or corrupt");
  uint64_t expected = checked_multiply(elements, dtype_size(info.dtype), where);
  if (info.end - info.begin != expected)
    fail(where, ": shape ", info.shape.to_string(), " of ", dtype->get<std::string>(), " needs ", expected,
         " bytes but data_offsets span ", info.end - info.begin);
  return info;
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(ByteRegion region, std::string source_name) {
  const uint64_t file_bytes = region.bytes.size();
  if (file_bytes < 8)
    fail(source_name, ": file is ", file_bytes, " bytes, too short for a safetensors header (truncated?)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | std::to_integer<uint64_t>(region.bytes[i]);
  if (header_bytes > max_header_bytes)
    fail(source_name, ": header length ", header_bytes, " exceeds the 100 MB limit: not a safetensors file?");
  if (header_bytes > file_bytes - 8)
    fail(source_name, ": header length ", header_bytes, " runs past the end of the file (", file_bytes,
         " bytes): the file is truncated");

  const char* header_text = reinterpret_cast<const char*>(region.bytes.data() + 8);
  json header = json::parse(header_text, header_text + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(source_name, ": header is not valid JSON");
  if (!header.is_object()) fail(source_name, ": header is not a JSON object");

  SafetensorsFile file;
  file.source_name_ = std::move(source_name);
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  std::vector<const TensorInfo*> by_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) fail(file.source_name_, ": __metadata__ is not an object");
      for (auto meta = it.value().begin(); meta != it.value().end(); ++meta) {
        if (!meta.value().is_string()) fail(file.source_name_, ": __metadata__ value '", meta.key(), "' is not a string");
        file.metadata_[meta.key()] = meta.value().get<std::string>();
      }
      continue;
    }
    file.tensors_[it.key()] = parse_entry(it.key(), it.value(), data_bytes, file.source_name_);
  }
  for (const auto& [name, info] : file.tensors_)
    if (info.end > info.begin) by_offset.push_back(&info);  // empty tensors occupy no bytes
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      fail(file.source_name_, ": tensors '", by_offset[i - 1]->name, "' and '", by_offset[i]->name,
           "' overlap in the data section");
  file.region_ = std::move(region);
  file.data_section_ = file.region_.bytes.data() + 8 + header_bytes;
  return file;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) { return parse(map_file(path), path); }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto found = tensors_.find(name);
  if (found == tensors_.end()) fail(source_name_, ": no tensor named '", name, "'");
  return found->second;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& entry = info(name);
  const std::byte* data = data_section_ + entry.begin;
  Tensor view = Tensor::wrap(region_.owner, data, entry.shape, entry.dtype, /*writable=*/false);
  // Writers pad the header so tensors are aligned; a file that does not gets a copy,
  // since kernels read elements as their type.
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(entry.dtype) != 0) return view.clone();
  return view;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> result;
  for (const auto& [name, info] : tensors_) result.push_back(name);
  return result;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    SHARDLM_CHECK(tensor.device().kind == DeviceKind::cpu, "write_safetensors: tensor '", name, "' is not on the host");
    header[name] = {{"dtype", dtype_to_safetensors(tensor.dtype())},
                    {"shape", tensor.shape().dims()},
                    {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned

  std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write ", temporary, ": check that the directory exists and is writable");
    uint64_t length = header_text.size();
    char length_bytes[8];
    for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    out.write(length_bytes, 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const auto& [name, tensor] : tensors)
      out.write(static_cast<const char*>(tensor.raw()), static_cast<std::streamsize>(tensor.nbytes()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(temporary.c_str());
      fail("error writing ", temporary, " (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) fail("cannot rename ", temporary, " to ", path, ": ", error.message());
}

Checkpoint Checkpoint::open(const ModelFiles& files) {
  Checkpoint checkpoint;
  checkpoint.location_ = files.location();
  if (files.gguf()) {
    checkpoint.gguf_ = std::make_shared<const GgufWeights>(files.gguf());
    return checkpoint;
  }
  const std::string index_name = "model.safetensors.index.json";
  if (files.exists(index_name)) {
    std::string index_path = files.path_of(index_name);
    json index = json::parse(files.read_text(index_name), nullptr, false);
    if (index.is_discarded() || !index.is_object()) fail(index_path, ": not valid JSON");
    auto weight_map = index.find("weight_map");
    if (weight_map == index.end() || !weight_map->is_object())
      fail(index_path, ": missing 'weight_map' object (tensor name -> shard file)");
    std::map<std::string, size_t> shard_index_of_file;
    for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
      if (!it.value().is_string()) fail(index_path, ": weight_map['", it.key(), "'] is not a file name");
      std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
        fail(index_path, ": shard name '", shard, "' must be a plain file name in the checkpoint directory");
      auto [found, inserted] = shard_index_of_file.try_emplace(shard, checkpoint.shards_.size());
      if (inserted) {
        if (!files.exists(shard))
          fail(files.path_of(shard), " not found: ", index_path, " lists it as a shard (tensor '", it.key(),
               "'); download the missing shard");
        checkpoint.shards_.push_back(SafetensorsFile::parse(files.map(shard), files.path_of(shard)));
      }
      if (!checkpoint.shards_[found->second].contains(it.key()))
        fail(files.path_of(shard), ": tensor '", it.key(), "' listed in ", index_path, " is not in this shard");
      checkpoint.shard_of_[it.key()] = found->second;
    }
    checkpoint.keep_only_the_text_model();
    return checkpoint;
  }
  const std::string single = "model.safetensors";
  if (!files.exists(single))
    fail("no weights in ", files.location(), ": expected model.safetensors or model.safetensors.index.json");
  checkpoint.shards_.push_back(SafetensorsFile::parse(files.map(single), files.path_of(single)));
  for (const std::string& name : checkpoint.shards_[0].names()) checkpoint.shard_of_[name] = 0;
  checkpoint.keep_only_the_text_model();
  return checkpoint;
}

void Checkpoint::keep_only_the_text_model() {
  if (shard_of_.contains("model.embed_tokens.weight")) return;
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    if (!shard_of_.contains(prefix + "embed_tokens.weight")) continue;
    std::map<std::string, size_t> text;
    size_t others = 0;
    for (const auto& [stored, shard] : shard_of_) {
      std::string name;
      if (stored.starts_with(prefix)) name = "model." + stored.substr(prefix.size());
      else if (stored == "language_model.lm_head.weight" || stored == "lm_head.weight") name = "lm_head.weight";
      if (name.empty()) {
        ++others;
        continue;
      }
      text[name] = shard;
      stored_names_[name] = stored;
    }
    shard_of_ = std::move(text);
    log::info(str_cat(location_, " is a multimodal checkpoint: its text model (under ", prefix, ") is run, its ",
                      others, " other tensors (vision tower, projector) are not read"));
    return;
  }
}

const std::string& Checkpoint::stored_name(const std::string& name) const {
  const auto found = stored_names_.find(name);
  return found == stored_names_.end() ? name : found->second;
}

const SafetensorsFile& Checkpoint::shard_for(const std::string& name) const {
  auto found = shard_of_.find(name);
  if (found == shard_of_.end())
    fail("tensor '", name, "' not found in checkpoint ", location_,
         ": the file does not match config.json's architecture or is incomplete");
  return shards_[found->second];
}

bool Checkpoint::contains(const std::string& name) const {
  return gguf_ ? gguf_->contains(name) : shard_of_.contains(name);
}

Tensor Checkpoint::tensor(const std::string& name) const {
  return gguf_ ? gguf_->tensor(name) : shard_for(name).tensor(stored_name(name));
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  return gguf_ ? gguf_->info(name) : shard_for(name).info(stored_name(name));
}

std::vector<std::string> Checkpoint::names() const {
  if (gguf_) return gguf_->names();
  std::vector<std::string> result;
  for (const auto& [name, shard] : shard_of_) result.push_back(name);
  return result;
}

}  // namespace shardlm::io
