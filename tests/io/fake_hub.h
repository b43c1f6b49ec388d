#pragma once
// A Hugging Face hub on 127.0.0.1 for tests: the resolve endpoint with the real
// hub's headers and error codes, LFS files redirected to a "CDN" (a second server,
// so a second origin, as on the real hub) that honors Range requests, the listing
// API, gated repositories, and injectable faults. Both servers stop when it is
// destroyed, or by themselves after a few minutes at most.

#include <httplib.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardlm::testing {

std::string sha256_hex(const std::string& bytes);
// The id git gives a blob, which the hub sends as the ETag of a file not in LFS.
std::string git_blob_id(const std::string& bytes);
std::string read_file(const std::string& path);

struct FakeRepo {
  std::string commit;
  std::map<std::string, std::string> files;  // name -> contents; *.safetensors are LFS files
  std::map<std::string, std::string> refs;   // branch or tag -> commit; "main" is added
  bool gated = false;
};

struct RecordedRequest {
  std::string method, path, range, authorization;
  int status = 0;
};

class FakeHub {
 public:
  static constexpr const char* token = "hf_fake_token_for_tests";
  static constexpr const char* default_commit = "0123456789abcdef0123456789abcdef01234567";

  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(hub_port_); }
  std::string cdn() const { return "http://127.0.0.1:" + std::to_string(cdn_port_); }
  void add_repo(const std::string& repo_id, FakeRepo repo);
  // A repository that moved: its old id answers with a relative redirect to the new one.
  void add_rename(const std::string& old_id, const std::string& new_id);

  // The next `times` transfers of `filename`'s bytes end abruptly once the byte at
  // offset `cut_at` of the file would be sent.
  void cut_transfers(const std::string& filename, size_t cut_at, int times);
  // Serves `filename` with one byte changed, so it no longer matches its sha256.
  void corrupt(const std::string& filename);
  // Answers range requests for `filename` with the whole file (200), as some servers do.
  void ignore_ranges(const std::string& filename);
  // Announces this size for an LFS file instead of its real one.
  void announce_size(const std::string& filename, uint64_t size);

  std::vector<RecordedRequest> requests() const;
  // Requests whose method matches and whose path contains `path_part`.
  size_t count(const std::string& method, const std::string& path_part) const;
  void clear_requests();

 private:
  struct Fault {
    size_t cut_at = 0;
    int cuts_left = 0;
    bool corrupt = false;
    bool ignore_ranges = false;
    uint64_t announced_size = 0;
  };

  void handle_resolve(const httplib::Request& request, httplib::Response& response);
  void handle_cdn(const httplib::Request& request, httplib::Response& response);
  void handle_listing(const httplib::Request& request, httplib::Response& response);

  httplib::Server hub_server_, cdn_server_;
  int hub_port_ = 0, cdn_port_ = 0;
  std::thread hub_thread_, cdn_thread_, watchdog_;
  mutable std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::map<std::string, FakeRepo> repos_;
  std::map<std::string, std::string> renames_;
  std::map<std::string, Fault> faults_;                     // by file name
  std::map<std::string, std::string> blobs_by_sha256_;       // CDN contents
  std::map<std::string, std::string> file_name_by_sha256_;  // to find a file's faults
  std::vector<RecordedRequest> requests_;
};

}  // namespace shardlm::testing
