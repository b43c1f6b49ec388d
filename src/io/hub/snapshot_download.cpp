#include "io/hub/snapshot_download.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/logging.h"
#include "io/hub/blob_download.h"
#include "io/hub/checkpoint_files.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_client.h"

namespace shardlm::io::hub {
namespace fs = std::filesystem;
namespace {

// Runs task(0..count-1) on up to `workers` threads. The first exception cancels the
// rest (each task sees `cancelled`) and is rethrown once all threads have stopped.
void run_in_parallel(size_t count, size_t workers, std::atomic<bool>& cancelled,
                     const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t index; !cancelled && (index = next++) < count;) {
      try {
        task(index);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        cancelled = true;
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    for (size_t i = 1; i < std::min(std::max<size_t>(workers, 1), count); ++i) threads.emplace_back(work);
    work();
  }
  if (first_error) std::rethrow_exception(first_error);
}

std::string joined(const std::vector<std::string>& items, size_t limit) {
  std::string text;
  for (size_t i = 0; i < items.size() && i < limit; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > limit) text += ", ...";
  return text;
}

class SnapshotFetcher {
 public:
  SnapshotFetcher(const HubSettings& settings, const SnapshotRequest& request)
      : request_(request), client_(settings, request.repo_id), cache_(settings.cache_dir, request.repo_id) {
    progress_mode_ = request.progress;
    if (progress_mode_ == ProgressMode::automatic && settings.progress_bars_disabled)
      progress_mode_ = ProgressMode::quiet;
  }

  fs::path fetch_checkpoint() {
    std::optional<FileMetadata> config = client_.file_metadata(request_.revision, std::string(config_file));
    if (!config)
      fail("'", request_.repo_id, "' has no ", config_file, " at revision '", request_.revision,
           "', so it is not a transformers model checkpoint");
    use_commit(config->commit);
    std::vector<FileMetadata> wanted;
    if (!cache_.has_file(commit_, config->filename)) wanted.push_back(*config);

    const bool weights_cached = cache_.has_file(commit_, std::string(single_weights_file)) ||
                                cache_.has_file(commit_, std::string(weights_index_file));
    std::vector<std::string> candidates;
    for (const std::string& name : optional_checkpoint_files())
      if (!cache_.has_file(commit_, name) && !cache_.is_known_absent(commit_, name)) candidates.push_back(name);
    if (!weights_cached) {
      candidates.emplace_back(single_weights_file);
      candidates.emplace_back(weights_index_file);
    }
    std::vector<std::optional<FileMetadata>> found = metadata(candidates);
    bool has_single_weights = false, has_index = false;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!found[i]) {
        cache_.mark_absent(commit_, candidates[i]);
        continue;
      }
      has_single_weights |= candidates[i] == single_weights_file;
      has_index |= candidates[i] == weights_index_file;
    }
    if (!weights_cached && !has_single_weights && !has_index)
      fail("'", request_.repo_id, "' has neither ", single_weights_file, " nor ", weights_index_file,
           " at revision '", request_.revision, "': shardlm loads safetensors checkpoints only");
    for (std::optional<FileMetadata>& file : found)
      if (file && !(has_single_weights && file->filename == weights_index_file)) wanted.push_back(std::move(*file));
    fetch(wanted);

    if (!cache_.has_file(commit_, std::string(single_weights_file))) fetch_shards();
    return cache_.snapshot_dir(commit_);
  }

  fs::path fetch_matching() {
    RepoListing listing = client_.list_files(request_.revision);
    use_commit(listing.commit);
    std::vector<std::string> selected;
    for (const std::string& name : listing.files)
      if (std::any_of(request_.include.begin(), request_.include.end(),
                      [&](const std::string& pattern) { return matches_glob(pattern, name); }))
        selected.push_back(name);
    if (selected.empty())
      fail("no file of '", request_.repo_id, "' at revision '", request_.revision, "' matches --include ",
           joined(request_.include, 8), "; it has ", listing.files.size(), " files: ", joined(listing.files, 12));
    fetch(required_metadata(selected, "the file listing"));
    return cache_.snapshot_dir(commit_);
  }

 private:
  void use_commit(const std::string& commit) {
    if (!is_commit_hash(commit))
      fail("the hub named commit '", commit, "' for revision '", request_.revision, "' of '", request_.repo_id,
           "', which is not a 40-digit commit hash; HF_ENDPOINT must be a Hugging Face hub or mirror");
    commit_ = commit;
    if (request_.revision != commit_) cache_.write_ref(request_.revision, commit_);
  }

  void fetch_shards() {
    std::ifstream index_file(cache_.snapshot_dir(commit_) / weights_index_file);
    std::stringstream index;
    index << index_file.rdbuf();
    const std::string where = str_cat(weights_index_file, " of '", request_.repo_id, "'");
    std::vector<std::string> missing;
    for (const std::string& shard : shards_named_by_index(index.str(), where))
      if (!cache_.has_file(commit_, shard)) missing.push_back(shard);
    fetch(required_metadata(missing, where));
  }

  std::vector<std::optional<FileMetadata>> metadata(const std::vector<std::string>& filenames) {
    std::vector<std::optional<FileMetadata>> found(filenames.size());
    std::atomic<bool> cancelled{false};
    run_in_parallel(filenames.size(), request_.parallel_downloads, cancelled,
                    [&](size_t i) { found[i] = client_.file_metadata(commit_, filenames[i]); });
    return found;
  }

  std::vector<FileMetadata> required_metadata(const std::vector<std::string>& filenames, const std::string& source) {
    std::vector<FileMetadata> files;
    std::vector<std::optional<FileMetadata>> found = metadata(filenames);
    for (size_t i = 0; i < filenames.size(); ++i) {
      if (!found[i])
        fail(source, " names ", filenames[i], ", but '", request_.repo_id, "' has no such file at commit ", commit_);
      files.push_back(std::move(*found[i]));
    }
    return files;
  }

  // Downloads the blobs the cache lacks and links every file into the snapshot.
  void fetch(const std::vector<FileMetadata>& files) {
    std::vector<const FileMetadata*> downloads;
    uint64_t total_bytes = 0, needed_bytes = 0;
    std::error_code error;
    for (const FileMetadata& file : files) {
      if (fs::exists(cache_.blob_path(file.etag), error)) {
        cache_.link_snapshot_file(commit_, file.filename, file.etag);
        continue;
      }
      downloads.push_back(&file);
      total_bytes += file.size;
      needed_bytes += file.size - std::min(file.size, partial_download_bytes(cache_, file));
    }
    if (downloads.empty()) return;
    check_disk_space(needed_bytes);

    DownloadProgress progress(progress_mode_, total_bytes, downloads.size());
    std::atomic<bool> cancelled{false};
    run_in_parallel(downloads.size(), request_.parallel_downloads, cancelled, [&](size_t i) {
      download_blob(client_, cache_, *downloads[i], progress, cancelled);
      cache_.link_snapshot_file(commit_, downloads[i]->filename, downloads[i]->etag);
    });
  }

  void check_disk_space(uint64_t needed_bytes) const {
    const fs::path blobs = cache_.directory() / "blobs";
    std::error_code error;
    fs::create_directories(blobs, error);
    if (error) fail("cannot create ", blobs.string(), ": ", error.message(), ". Set HF_HUB_CACHE to a writable directory");
    const fs::space_info space = fs::space(blobs, error);
    if (!error && space.available < needed_bytes)
      fail("not enough disk space to download '", request_.repo_id, "': it needs ", format_bytes(needed_bytes),
           " but ", blobs.string(), " has ", format_bytes(space.available),
           " free. Free space, or set HF_HUB_CACHE to a directory on a larger disk");
  }

  const SnapshotRequest& request_;
  HubClient client_;
  RepoCache cache_;
  ProgressMode progress_mode_;
  std::string commit_;
};

}  // namespace

fs::path download_snapshot(const HubSettings& settings, const SnapshotRequest& request) {
  SnapshotFetcher fetcher(settings, request);
  try {
    return request.include.empty() ? fetcher.fetch_checkpoint() : fetcher.fetch_matching();
  } catch (const TransportError& error) {
    throw TransportError(str_cat("cannot download '", request.repo_id, "' from ", settings.endpoint, ": ",
                                 error.what(), ". Check the network connection (and HTTPS_PROXY), or set HF_ENDPOINT "
                                 "to a reachable mirror"));
  }
}

fs::path resolve_snapshot(const HubSettings& settings, const SnapshotRequest& request) {
  RepoCache cache(settings.cache_dir, request.repo_id);
  auto complete_cached_snapshot = [&]() -> std::optional<fs::path> {
    std::optional<std::string> commit = cache.commit_for(request.revision);
    if (!commit || !missing_checkpoint_files(cache.snapshot_dir(*commit)).empty()) return std::nullopt;
    return cache.snapshot_dir(*commit);
  };
  if (is_commit_hash(request.revision))
    if (std::optional<fs::path> snapshot = complete_cached_snapshot()) return *snapshot;

  if (settings.offline) {
    std::optional<std::string> commit = cache.commit_for(request.revision);
    std::error_code error;
    if (!commit || !fs::is_directory(cache.snapshot_dir(*commit), error))
      fail("model '", request.repo_id, "' (revision '", request.revision, "') is not in the Hugging Face cache at ",
           settings.cache_dir.string(), ", and offline mode (HF_HUB_OFFLINE=1) forbids downloading it. Run `shardlm "
           "download ", request.repo_id, "` while online, or point HF_HUB_CACHE at a cache that has it");
    const fs::path snapshot = cache.snapshot_dir(*commit);
    std::vector<std::string> missing = missing_checkpoint_files(snapshot);
    if (!missing.empty())
      fail("the cached snapshot ", snapshot.string(), " of '", request.repo_id, "' lacks ", joined(missing, 8),
           ", and offline mode (HF_HUB_OFFLINE=1) forbids downloading it. Run `shardlm download ", request.repo_id,
           "` while online");
    return snapshot;
  }

  try {
    return download_snapshot(settings, request);
  } catch (const TransportError& error) {
    if (std::optional<fs::path> snapshot = complete_cached_snapshot()) {
      log::warning(str_cat("cannot reach ", settings.endpoint, " (", error.what(), "); using the cached snapshot ",
                           snapshot->string()));
      return *snapshot;
    }
    fail(error.what(), ". The cache at ", settings.cache_dir.string(), " has no complete copy of revision '",
         request.revision, "' to use instead");
  }
}

}  // namespace shardlm::io::hub
