#pragma once
// The files of one checkpoint: a directory on disk, or a set of files embedded in
// the shardlm binary (the default model). Everything above io/ reads checkpoints
// through this, so the embedded model loads exactly like a downloaded one.

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>

namespace shardlm::io {

class GgufFile;

// Bytes kept alive by `owner` (a memory map, or nothing for static data).
struct ByteRegion {
  std::shared_ptr<const void> owner;
  std::span<const std::byte> bytes;
};

// Maps a whole file read-only. Throws shardlm::Error naming the path and the OS error.
ByteRegion map_file(const std::string& path);

// Drops the resident pages that lie wholly inside [data, data + bytes) of a read-only
// file mapping once a converted copy has replaced them: the memory of `--dtype` or
// `--quantize` is then the converted weights, not those plus the file's pages. The
// bytes stay readable (a later read faults them back in from the file).
void release_mapped_pages(const void* data, size_t bytes);

class ModelFiles {
 public:
  static ModelFiles directory(const std::string& path);
  // `files` maps file names to static bytes; `name` is shown in messages, e.g. "<embedded stories260K>".
  static ModelFiles embedded(std::string name, std::map<std::string, std::span<const std::byte>> files);
  // A GGUF file (parsed once, io/gguf.h): its weights are the file itself, and `derived`
  // holds the texts its metadata implies (config.json, tokenizer.json) as files of the checkpoint.
  static ModelFiles gguf(std::shared_ptr<const GgufFile> file, std::map<std::string, std::string> derived);

  const std::string& location() const { return location_; }
  // Embedded files have no directory on disk to hand to another from_pretrained call.
  bool is_embedded() const { return is_embedded_; }
  // The GGUF file the weights are in, or null for safetensors.
  const std::shared_ptr<const GgufFile>& gguf() const { return gguf_; }
  // Where a file of this checkpoint is, for messages: "dir/config.json".
  std::string path_of(const std::string& filename) const;
  bool exists(const std::string& filename) const;
  // Throws naming the missing file if absent.
  std::string read_text(const std::string& filename) const;
  ByteRegion map(const std::string& filename) const;

 private:
  std::string location_;
  bool is_embedded_ = false;
  std::map<std::string, std::span<const std::byte>> embedded_files_;
  std::shared_ptr<const GgufFile> gguf_;
  std::shared_ptr<const std::map<std::string, std::string>> derived_files_;
};

}  // namespace shardlm::io
