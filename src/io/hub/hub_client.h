#pragma once
// The hub's HTTP interface for one repository: file metadata from the resolve
// endpoint, the file listing, and messages for the errors the hub answers with.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hub/hub_settings.h"
#include "io/hub/http_client.h"

namespace shardlm::io::hub {

struct FileMetadata {
  std::string filename;
  std::string commit;        // X-Repo-Commit
  std::string etag;          // X-Linked-Etag, else ETag, without quotes or W/
  uint64_t size = 0;         // X-Linked-Size, else Content-Length
  bool is_lfs = false;       // X-Linked-Etag was sent: the etag is the sha256 of the contents
  std::string download_url;  // the redirect target (a CDN), or the resolve URL itself
};

struct RepoListing {
  std::string commit;
  std::vector<std::string> files;
};

class HubClient {
 public:
  HubClient(HubSettings settings, std::string repo_id);

  const HubSettings& settings() const { return settings_; }
  const std::string& repo_id() const { return repo_id_; }

  // nullopt when the repository exists but has no such file at that revision.
  std::optional<FileMetadata> file_metadata(const std::string& revision, const std::string& filename) const;
  RepoListing list_files(const std::string& revision) const;
  // The GET for a file's bytes; the token goes only to the hub's own origin.
  HttpRequest download_request(const FileMetadata& file) const;

  // Throws an Error saying what the failed response means and what to do; 5xx
  // answers throw TransportError, since retrying or using the cache may help.
  [[noreturn]] void fail_response(const HttpResponse& response, const std::string& url,
                                  const std::string& revision, const std::string& filename) const;

 private:
  std::vector<std::string> hub_headers() const;
  std::string resolve_url(const std::string& revision, const std::string& filename) const;

  HubSettings settings_;
  std::string repo_id_;
};

}  // namespace shardlm::io::hub
