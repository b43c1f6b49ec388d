#pragma once
// Fetching one file's contents into the cache's blobs/ folder.

#include <atomic>

#include "io/hub/hub_cache.h"
#include "io/hub/hub_client.h"
#include "io/hub/progress.h"

namespace shardlm::io::hub {

// Bytes of an interrupted download of `file` already on disk (blobs/{etag}.incomplete).
uint64_t partial_download_bytes(const RepoCache& cache, const FileMetadata& file);

// Writes blobs/{etag}, resuming blobs/{etag}.incomplete if an earlier attempt left
// one, retrying cut connections, and checking the size and, for LFS files, the
// sha256 before the blob appears. Holds the blob's lock, so concurrent processes
// download it once. Throws when `cancelled` becomes true.
void download_blob(const HubClient& client, const RepoCache& cache, const FileMetadata& file,
                   DownloadProgress& progress, const std::atomic<bool>& cancelled);

}  // namespace shardlm::io::hub
