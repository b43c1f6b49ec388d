#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/limits.h"
#include "io/gguf.h"
#include "io/model_files.h"

namespace shardlm::io {

ByteRegion map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    fail("cannot stat ", path, ": ", std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(path, " is not a regular file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return {nullptr, {}};
  }
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  ::close(fd);
  if (address == MAP_FAILED) fail("cannot memory-map ", path, " (", size, " bytes): ", std::strerror(error));
  std::shared_ptr<const void> owner(address, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  return {std::move(owner), {static_cast<const std::byte*>(address), size}};
}

void release_mapped_pages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // advice only
}

ModelFiles ModelFiles::directory(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error))
    fail("model directory ", path, " does not exist or is not a directory: pass a checkpoint directory "
         "holding config.json and *.safetensors");
  ModelFiles files;
  files.location_ = path;
  return files;
}

ModelFiles ModelFiles::embedded(std::string name, std::map<std::string, std::span<const std::byte>> files) {
  ModelFiles result;
  result.location_ = std::move(name);
  result.is_embedded_ = true;
  result.embedded_files_ = std::move(files);
  return result;
}

ModelFiles ModelFiles::gguf(std::shared_ptr<const GgufFile> file, std::map<std::string, std::string> derived) {
  ModelFiles result;
  result.location_ = file->source_name();
  result.gguf_ = std::move(file);
  result.derived_files_ = std::make_shared<const std::map<std::string, std::string>>(std::move(derived));
  return result;
}

std::string ModelFiles::path_of(const std::string& filename) const {
  if (gguf_) return str_cat(location_, " (its ", filename, ")");
  return (std::filesystem::path(location_) / filename).string();
}

bool ModelFiles::exists(const std::string& filename) const {
  if (is_embedded_) return embedded_files_.contains(filename);
  if (derived_files_) return derived_files_->contains(filename);
  std::error_code error;
  return std::filesystem::is_regular_file(path_of(filename), error);
}

std::string ModelFiles::read_text(const std::string& filename) const {
  ByteRegion region = map(filename);
  limits::check_json_file_size(path_of(filename), region.bytes.size());
  return std::string(reinterpret_cast<const char*>(region.bytes.data()), region.bytes.size());
}

ByteRegion ModelFiles::map(const std::string& filename) const {
  if (derived_files_) {
    const auto found = derived_files_->find(filename);
    if (found == derived_files_->end()) fail(location_, " is a GGUF file: it has no ", filename);
    // The text lives as long as the map, which every copy of these files shares.
    return {derived_files_, std::as_bytes(std::span<const char>(found->second.data(), found->second.size()))};
  }
  if (!is_embedded_) {
    if (!exists(filename)) fail(path_of(filename), " not found: the checkpoint is missing this file");
    return map_file(path_of(filename));
  }
  auto found = embedded_files_.find(filename);
  if (found == embedded_files_.end()) fail(path_of(filename), " not found in the embedded model");
  return {nullptr, found->second};
}

}  // namespace shardlm::io
