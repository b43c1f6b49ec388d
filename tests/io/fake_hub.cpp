#include "io/fake_hub.h"

#include <openssl/evp.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace shardlm::testing {
namespace {

// However a test ends, the server stops by then.
constexpr auto longest_life = std::chrono::minutes(3);
constexpr size_t chunk_bytes = 16384;

std::string digest_hex(const std::string& bytes, const EVP_MD* algorithm) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, algorithm, nullptr);
  static const char* const hex = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

bool is_lfs(const std::string& filename) { return filename.ends_with(".safetensors"); }

void hub_error(httplib::Response& response, int status, const std::string& code, const std::string& message) {
  response.status = status;
  response.set_header("X-Error-Code", code);
  response.set_header("X-Error-Message", message);
  response.set_content("{\"error\":\"" + message + "\"}", "application/json");
}

}  // namespace

std::string sha256_hex(const std::string& bytes) { return digest_hex(bytes, EVP_sha256()); }

std::string git_blob_id(const std::string& bytes) {
  return digest_hex("blob " + std::to_string(bytes.size()) + std::string(1, '\0') + bytes, EVP_sha1());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

namespace {

int start(httplib::Server& server, std::thread& thread) {
  server.set_keep_alive_max_count(1);  // no idle connection can delay stop()
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  int port = server.bind_to_any_port("127.0.0.1");
  if (port <= 0) throw std::runtime_error("the fake hub cannot bind a port on 127.0.0.1");
  thread = std::thread([&server] { server.listen_after_bind(); });
  for (int i = 0; i < 500 && !server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return port;
}

}  // namespace

FakeHub::FakeHub() {
  hub_server_.Get(R"(/api/models/([^/]+/[^/]+)/revision/(.+))",
                  [this](const httplib::Request& request, httplib::Response& response) {
                    handle_listing(request, response);
                  });
  hub_server_.Get(R"(/([^/]+/[^/]+)/resolve/([^/]+)/(.+))",
                  [this](const httplib::Request& request, httplib::Response& response) {
                    handle_resolve(request, response);
                  });
  cdn_server_.Get(R"(/cdn/([0-9a-f]{64}))", [this](const httplib::Request& request, httplib::Response& response) {
    handle_cdn(request, response);
  });
  hub_port_ = start(hub_server_, hub_thread_);
  cdn_port_ = start(cdn_server_, cdn_thread_);
  watchdog_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    stop_requested_.wait_for(lock, longest_life, [this] { return stopping_; });
    hub_server_.stop();
    cdn_server_.stop();
  });
}

FakeHub::~FakeHub() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  watchdog_.join();
  hub_thread_.join();
  cdn_thread_.join();
}

void FakeHub::add_repo(const std::string& repo_id, FakeRepo repo) {
  std::lock_guard lock(mutex_);
  repo.refs.emplace("main", repo.commit);
  for (const auto& [name, contents] : repo.files) {
    if (!is_lfs(name)) continue;
    const std::string sha = sha256_hex(contents);
    blobs_by_sha256_[sha] = contents;
    file_name_by_sha256_[sha] = name;
  }
  repos_[repo_id] = std::move(repo);
}

void FakeHub::add_rename(const std::string& old_id, const std::string& new_id) {
  std::lock_guard lock(mutex_);
  renames_[old_id] = new_id;
}

void FakeHub::cut_transfers(const std::string& filename, size_t cut_at, int times) {
  std::lock_guard lock(mutex_);
  faults_[filename].cut_at = cut_at;
  faults_[filename].cuts_left = times;
}

void FakeHub::corrupt(const std::string& filename) {
  std::lock_guard lock(mutex_);
  faults_[filename].corrupt = true;
}

void FakeHub::ignore_ranges(const std::string& filename) {
  std::lock_guard lock(mutex_);
  faults_[filename].ignore_ranges = true;
}

void FakeHub::announce_size(const std::string& filename, uint64_t size) {
  std::lock_guard lock(mutex_);
  faults_[filename].announced_size = size;
}

std::vector<RecordedRequest> FakeHub::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

size_t FakeHub::count(const std::string& method, const std::string& path_part) const {
  std::lock_guard lock(mutex_);
  size_t matches = 0;
  for (const RecordedRequest& request : requests_)
    matches += request.method == method && request.path.find(path_part) != std::string::npos;
  return matches;
}

void FakeHub::clear_requests() {
  std::lock_guard lock(mutex_);
  requests_.clear();
}

void FakeHub::handle_resolve(const httplib::Request& request, httplib::Response& response) {
  std::lock_guard lock(mutex_);
  requests_.push_back({request.method, request.path, request.get_header_value("Range"),
                       request.get_header_value("Authorization")});
  const std::string repo_id = request.matches[1], revision = request.matches[2], filename = request.matches[3];
  if (auto renamed = renames_.find(repo_id); renamed != renames_.end()) {
    response.status = 307;
    response.set_header("Location", "/" + renamed->second + "/resolve/" + revision + "/" + filename);
    return;
  }
  auto repo = repos_.find(repo_id);
  if (repo == repos_.end()) return hub_error(response, 404, "RepoNotFound", "Repository not found");
  const std::string authorization = request.get_header_value("Authorization");
  if (repo->second.gated && authorization.empty())
    return hub_error(response, 401, "GatedRepo", "Access to model " + repo_id + " is restricted.");
  if (repo->second.gated && authorization != std::string("Bearer ") + token)
    return hub_error(response, 403, "GatedRepo", "Access to model " + repo_id + " is restricted.");
  auto ref = repo->second.refs.find(revision);
  if (ref == repo->second.refs.end() && revision != repo->second.commit)
    return hub_error(response, 404, "RevisionNotFound", "Invalid rev id: " + revision);
  auto file = repo->second.files.find(filename);
  if (file == repo->second.files.end()) return hub_error(response, 404, "EntryNotFound", "Entry not found");

  response.set_header("X-Repo-Commit", repo->second.commit);
  if (!is_lfs(filename)) {
    response.set_header("ETag", "\"" + git_blob_id(file->second) + "\"");
    response.set_content(file->second, "application/octet-stream");
    return;
  }
  const std::string sha = sha256_hex(file->second);
  const uint64_t announced = faults_[filename].announced_size;
  response.status = 302;
  response.set_header("Location", cdn() + "/cdn/" + sha);
  response.set_header("X-Linked-Etag", "\"" + sha + "\"");
  response.set_header("X-Linked-Size", std::to_string(announced ? announced : file->second.size()));
  response.set_header("ETag", "\"" + git_blob_id(file->second) + "\"");
}

void FakeHub::handle_cdn(const httplib::Request& request, httplib::Response& response) {
  std::lock_guard lock(mutex_);
  requests_.push_back({request.method, request.path, request.get_header_value("Range"),
                       request.get_header_value("Authorization")});
  const std::string sha = request.matches[1];
  auto blob = blobs_by_sha256_.find(sha);
  if (blob == blobs_by_sha256_.end()) {
    response.status = 404;
    return;
  }
  Fault& fault = faults_[file_name_by_sha256_[sha]];
  std::string served = blob->second;
  if (fault.corrupt) served[served.size() / 2] = static_cast<char>(served[served.size() / 2] ^ 0x5a);
  size_t cut_at = SIZE_MAX;
  if (fault.cuts_left > 0) {
    --fault.cuts_left;
    cut_at = fault.cut_at;
  }
  if (fault.ignore_ranges) {  // httplib slices any response of known length to the range, so send it chunked
    response.status = 200;
    response.set_chunked_content_provider("application/octet-stream",
                                          [served](size_t offset, httplib::DataSink& sink) {
                                            size_t end = std::min(served.size(), offset + chunk_bytes);
                                            sink.write(served.data() + offset, end - offset);
                                            if (end == served.size()) sink.done();
                                            return true;
                                          });
    return;
  }
  response.set_header("Accept-Ranges", "bytes");
  response.set_content_provider(
      served.size(), "application/octet-stream",
      [served, cut_at](size_t offset, size_t length, httplib::DataSink& sink) {
        size_t end = std::min(offset + length, offset + chunk_bytes);
        if (end <= cut_at) return sink.write(served.data() + offset, end - offset);
        if (offset < cut_at) sink.write(served.data() + offset, cut_at - offset);
        return false;  // drops the connection mid-body
      });
}

void FakeHub::handle_listing(const httplib::Request& request, httplib::Response& response) {
  std::lock_guard lock(mutex_);
  requests_.push_back({request.method, request.path, request.get_header_value("Range"),
                       request.get_header_value("Authorization")});
  auto repo = repos_.find(request.matches[1]);
  if (repo == repos_.end()) return hub_error(response, 404, "RepoNotFound", "Repository not found");
  auto ref = repo->second.refs.find(request.matches[2]);
  if (ref == repo->second.refs.end() && request.matches[2] != repo->second.commit)
    return hub_error(response, 404, "RevisionNotFound", "Invalid rev id");
  nlohmann::json siblings = nlohmann::json::array();
  for (const auto& [name, contents] : repo->second.files) siblings.push_back({{"rfilename", name}});
  nlohmann::json info = {{"id", request.matches[1]}, {"sha", repo->second.commit}, {"siblings", siblings}};
  response.set_content(info.dump(), "application/json");
}

}  // namespace shardlm::testing
