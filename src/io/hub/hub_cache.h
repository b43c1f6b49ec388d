#pragma once
// One repository's folder in the cache, laid out exactly as huggingface_hub lays it
// out, so that either tool reads what the other wrote:
//   models--{org}--{name}/refs/{revision}             the commit a branch or tag last resolved to
//   models--{org}--{name}/blobs/{etag}                contents; an LFS file's etag is its sha256
//   models--{org}--{name}/snapshots/{commit}/{file}   relative symlink to ../../blobs/{etag}
//   models--{org}--{name}/.no_exist/{commit}/{file}   empty: the file is known to be absent
//   .locks/models--{org}--{name}/{etag}.lock          held while the blob is written

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace shardlm::io::hub {

// A full 40-digit lowercase hex git commit id.
bool is_commit_hash(std::string_view revision);

// "name" or "org/name" made of letters, digits, '-', '_' and '.', as the hub accepts.
bool is_repo_id(std::string_view text);

// "org/name" -> "models--org--name".
std::string repo_folder_name(std::string_view repo_id);

class RepoCache {
 public:
  // Throws if repo_id is not a hub id.
  RepoCache(const std::filesystem::path& cache_dir, std::string repo_id);

  const std::string& repo_id() const { return repo_id_; }
  const std::filesystem::path& directory() const { return directory_; }

  // The commit refs/{revision} names, or the revision itself when it is a commit hash.
  std::optional<std::string> commit_for(const std::string& revision) const;
  std::filesystem::path snapshot_dir(const std::string& commit) const;
  std::filesystem::path blob_path(const std::string& etag) const;
  std::filesystem::path lock_path(const std::string& etag) const;

  bool has_file(const std::string& commit, const std::string& filename) const;
  bool is_known_absent(const std::string& commit, const std::string& filename) const;
  void mark_absent(const std::string& commit, const std::string& filename) const;

  // Written atomically: concurrent processes (tensor-parallel ranks) may resolve together.
  void write_ref(const std::string& revision, const std::string& commit) const;
  // Points snapshots/{commit}/{filename} at blobs/{etag} through a relative symlink.
  void link_snapshot_file(const std::string& commit, const std::string& filename, const std::string& etag) const;

 private:
  std::filesystem::path cache_dir_;
  std::string repo_id_;
  std::filesystem::path directory_;
};

// An exclusive flock(2) on `path`, the same lock huggingface_hub's filelock takes.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int descriptor_ = -1;
};

}  // namespace shardlm::io::hub
