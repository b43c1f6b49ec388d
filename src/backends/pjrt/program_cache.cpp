#include "backends/pjrt/program_cache.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/logging.h"

namespace shardlm::backends::pjrt {
namespace {

constexpr const char* magic = "shardlm-pjrt-program 1";

// FNV-1a over the bytes, from `seed`: two seeds give 128 bits, enough that distinct
// programs never share a file in practice (the key is also checked inside the file).
uint64_t fnv1a(const std::string& bytes, uint64_t seed) {
  uint64_t hash = seed;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

ProgramCache::ProgramCache(const std::string& directory)
    : directory_(directory == "none" ? "" : directory.empty() ? default_directory() : directory) {}

std::string ProgramCache::default_directory() {
  if (const char* dir = std::getenv("SHARDLM_COMPILE_CACHE"); dir && *dir) return std::string(dir) == "none" ? "" : dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/shardlm/pjrt";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/shardlm/pjrt";
  return "";
}

std::string ProgramCache::key(const std::string& text, const std::string& options, const std::string& compiler) {
  const std::string all = str_cat(compiler.size(), ":", compiler, options.size(), ":", options, text);
  char name[40];
  std::snprintf(name, sizeof name, "%016llx%016llx", static_cast<unsigned long long>(fnv1a(all, 0xcbf29ce484222325ull)),
                static_cast<unsigned long long>(fnv1a(all, 0x84222325cbf29ce4ull)));
  return name;
}

std::optional<std::string> ProgramCache::load(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  std::ifstream file(directory_ + "/" + key + ".pjrt", std::ios::binary);
  if (!file) return std::nullopt;
  std::string header, stored_key;
  if (!std::getline(file, header) || header != magic || !std::getline(file, stored_key) || stored_key != key)
    return std::nullopt;
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (!file.good() && !file.eof()) return std::nullopt;
  return bytes.str();
}

bool ProgramCache::store(const std::string& key, const std::string& executable) const {
  if (!enabled()) return false;
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  const std::string path = directory_ + "/" + key + ".pjrt";
  const std::string temporary = str_cat(path, ".tmp.", ::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << magic << "\n" << key << "\n";
    file.write(executable.data(), static_cast<std::streamsize>(executable.size()));
    file.close();
    if (!file) {
      log::warning(str_cat("compile cache: cannot write ", temporary, " (", directory_,
                           " not writable?): the program is not kept; set --compile-cache to a writable directory"));
      std::filesystem::remove(temporary, error);
      return false;
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    log::warning(str_cat("compile cache: cannot rename ", temporary, " to ", path, ": ", error.message()));
    std::filesystem::remove(temporary, error);
    return false;
  }
  return true;
}

}  // namespace shardlm::backends::pjrt
