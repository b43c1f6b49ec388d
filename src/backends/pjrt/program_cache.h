#pragma once
// Compiled PJRT programs kept on disk across processes, one file per program, named by a
// hash of everything that decides the compiled code: the program text, the compile
// options, the plugin's platform and version. A second process with the same cache
// deserializes instead of compiling. Files are written whole under a temporary name and
// renamed, so a crash or a concurrent writer never leaves half a program behind.

#include <optional>
#include <string>

namespace shardlm::backends::pjrt {

class ProgramCache {
 public:
  // `directory` empty: the default (default_directory()); "none": no cache.
  explicit ProgramCache(const std::string& directory);
  bool enabled() const { return !directory_.empty(); }
  const std::string& directory() const { return directory_; }

  // The file name (a 128-bit hash, hex) for one program.
  static std::string key(const std::string& text, const std::string& options, const std::string& compiler);
  // The stored executable for `key`, or nullopt (absent, unreadable, or written for another key).
  std::optional<std::string> load(const std::string& key) const;
  // Stores it; false when it could not (logged: for a process that runs its programs the
  // cache is an optimization).
  bool store(const std::string& key, const std::string& executable) const;

  // $SHARDLM_COMPILE_CACHE, else $XDG_CACHE_HOME/shardlm/pjrt, else ~/.cache/shardlm/pjrt.
  static std::string default_directory();

 private:
  std::string directory_;
};

}  // namespace shardlm::backends::pjrt
