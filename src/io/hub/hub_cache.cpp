#include "io/hub/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/logging.h"

namespace shardlm::io::hub {
namespace fs = std::filesystem;
namespace {

bool is_word_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool is_name_part(std::string_view part) {
  if (part.empty() || !is_word_character(part.front()) || !is_word_character(part.back())) return false;
  for (char c : part)
    if (!is_word_character(c) && c != '-' && c != '.') return false;
  return true;
}

// Names from the network or the user become paths; none may climb out of the cache.
void check_relative_name(const std::string& name, std::string_view what) {
  fs::path path(name);
  bool escapes = name.empty() || path.is_absolute();
  for (const fs::path& part : path)
    if (part == ".." || part == ".") escapes = true;
  if (escapes) fail(what, " '", name, "' is not a plain relative name, so it cannot be stored in the cache");
}

// A unique sibling name, so a rename(2) replaces the target atomically.
fs::path temporary_sibling(const fs::path& path) {
  std::ostringstream suffix;
  suffix << ".tmp." << ::getpid() << "." << std::this_thread::get_id();
  return path.string() + suffix.str();
}

void make_directories(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error)
    fail("cannot create ", directory.string(), ": ", error.message(),
         ". Set HF_HUB_CACHE to a writable directory");
}

}  // namespace

bool is_commit_hash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_repo_id(std::string_view text) {
  if (text.size() > 96 || text.find("--") != std::string_view::npos || text.find("..") != std::string_view::npos ||
      text.ends_with(".git"))
    return false;
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return is_name_part(text);
  return is_name_part(text.substr(0, slash)) && is_name_part(text.substr(slash + 1));
}

std::string repo_folder_name(std::string_view repo_id) {
  std::string name = "models--";
  for (char c : repo_id) {
    if (c == '/') name += "--";
    else name += c;
  }
  return name;
}

RepoCache::RepoCache(const fs::path& cache_dir, std::string repo_id)
    : cache_dir_(fs::absolute(cache_dir)), repo_id_(std::move(repo_id)) {
  if (!is_repo_id(repo_id_))
    fail("'", repo_id_, "' is not a Hugging Face model id: expected 'org/name' (letters, digits, '-', '_', '.')");
  directory_ = cache_dir_ / repo_folder_name(repo_id_);
}

std::optional<std::string> RepoCache::commit_for(const std::string& revision) const {
  check_relative_name(revision, "revision");
  std::ifstream ref(directory_ / "refs" / revision);
  if (ref) {
    std::string commit;
    ref >> commit;
    if (is_commit_hash(commit)) return commit;
  }
  if (is_commit_hash(revision)) return revision;
  return std::nullopt;
}

fs::path RepoCache::snapshot_dir(const std::string& commit) const {
  check_relative_name(commit, "commit");
  return directory_ / "snapshots" / commit;
}

fs::path RepoCache::blob_path(const std::string& etag) const {
  check_relative_name(etag, "etag");
  return directory_ / "blobs" / etag;
}

fs::path RepoCache::lock_path(const std::string& etag) const {
  check_relative_name(etag, "etag");
  return cache_dir_ / ".locks" / repo_folder_name(repo_id_) / (etag + ".lock");
}

bool RepoCache::has_file(const std::string& commit, const std::string& filename) const {
  check_relative_name(filename, "file name");
  std::error_code error;
  return fs::is_regular_file(snapshot_dir(commit) / filename, error);
}

bool RepoCache::is_known_absent(const std::string& commit, const std::string& filename) const {
  check_relative_name(commit, "commit");
  check_relative_name(filename, "file name");
  std::error_code error;
  return fs::exists(directory_ / ".no_exist" / commit / filename, error);
}

void RepoCache::mark_absent(const std::string& commit, const std::string& filename) const {
  check_relative_name(commit, "commit");
  check_relative_name(filename, "file name");
  fs::path marker = directory_ / ".no_exist" / commit / filename;
  make_directories(marker.parent_path());
  std::ofstream touch(marker, std::ios::app);
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  check_relative_name(revision, "revision");
  fs::path ref = directory_ / "refs" / revision;
  make_directories(ref.parent_path());
  fs::path temporary = temporary_sibling(ref);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << commit;  // no newline: huggingface_hub writes the bare hash
    if (!out.flush()) fail("cannot write ", temporary.string(), ": ", std::strerror(errno));
  }
  std::error_code error;
  fs::rename(temporary, ref, error);
  if (error) fail("cannot write ", ref.string(), ": ", error.message());
}

void RepoCache::link_snapshot_file(const std::string& commit, const std::string& filename,
                                   const std::string& etag) const {
  check_relative_name(filename, "file name");
  fs::path pointer = snapshot_dir(commit) / filename;
  make_directories(pointer.parent_path());
  fs::path target = blob_path(etag).lexically_relative(pointer.parent_path());
  fs::path temporary = temporary_sibling(pointer);
  std::error_code error;
  fs::create_symlink(target, temporary, error);
  if (!error) fs::rename(temporary, pointer, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    fail("cannot create the symlink ", pointer.string(), " -> ", target.string(), ": ", error.message());
  }
}

FileLock::FileLock(const fs::path& path) {
  make_directories(path.parent_path());
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) fail("cannot open the lock file ", path.string(), ": ", std::strerror(errno));
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) == 0) return;
  log::info(str_cat("waiting for ", path.string(), ": another process is writing the same file"));
  while (::flock(descriptor_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int error = errno;
    ::close(descriptor_);
    fail("cannot lock ", path.string(), ": ", std::strerror(error));
  }
}

FileLock::~FileLock() {
  ::flock(descriptor_, LOCK_UN);
  ::close(descriptor_);
}

}  // namespace shardlm::io::hub
