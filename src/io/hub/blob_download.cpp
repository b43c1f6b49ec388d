#include "io/hub/blob_download.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/logging.h"

namespace shardlm::io::hub {
namespace fs = std::filesystem;
namespace {

// huggingface_hub also gives a cut transfer five tries, each resuming where the last stopped.
constexpr int max_attempts = 5;

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) { reset(); }
  void reset() {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
      fail("OpenSSL could not start a sha256 digest");
  }
  void update(std::string_view bytes) { EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()); }
  std::string hex_digest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(context_.get(), digest, &length);
    static const char* const hex = "0123456789abcdef";
    std::string text;
    for (unsigned int i = 0; i < length; ++i) {
      text += hex[digest[i] >> 4];
      text += hex[digest[i] & 15];
    }
    return text;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

class PartialFile {
 public:
  explicit PartialFile(fs::path path) : path_(std::move(path)) {
    descriptor_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (descriptor_ < 0) fail("cannot open ", path_.string(), ": ", std::strerror(errno));
  }
  ~PartialFile() { ::close(descriptor_); }
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;

  // Feeds what an earlier attempt wrote into `hash`, so a resumed file is verified whole.
  void hash_contents(Sha256& hash) const {
    std::vector<char> buffer(1 << 20);
    for (off_t offset = 0;;) {
      ssize_t got = ::pread(descriptor_, buffer.data(), buffer.size(), offset);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail("cannot read ", path_.string(), ": ", std::strerror(errno));
      if (got == 0) return;
      hash.update({buffer.data(), static_cast<size_t>(got)});
      offset += got;
    }
  }
  void truncate() {
    if (::ftruncate(descriptor_, 0) != 0) fail("cannot truncate ", path_.string(), ": ", std::strerror(errno));
  }
  // Throws naming the OS error: the one place a full disk shows up.
  void append(std::string_view bytes, uint64_t offset, uint64_t size) {
    while (!bytes.empty()) {
      ssize_t written = ::write(descriptor_, bytes.data(), bytes.size());
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) {
        const int error = errno;
        const bool full = error == ENOSPC || error == EDQUOT;
        fail("cannot write ", path_.string(), " at byte ", offset, " of ", size, ": ", std::strerror(error),
             full ? ". Free disk space, or set HF_HUB_CACHE to a larger disk, then run again to resume" : "");
      }
      bytes.remove_prefix(static_cast<size_t>(written));
      offset += static_cast<uint64_t>(written);
    }
  }
  void sync() {
    if (::fsync(descriptor_) != 0) fail("cannot flush ", path_.string(), " to disk: ", std::strerror(errno));
  }

 private:
  fs::path path_;
  int descriptor_ = -1;
};

fs::path partial_path(const RepoCache& cache, const FileMetadata& file) {
  return cache.blob_path(file.etag).string() + ".incomplete";
}

}  // namespace

uint64_t partial_download_bytes(const RepoCache& cache, const FileMetadata& file) {
  std::error_code error;
  uint64_t size = fs::file_size(partial_path(cache, file), error);
  return error ? 0 : size;
}

void download_blob(const HubClient& client, const RepoCache& cache, const FileMetadata& file,
                   DownloadProgress& progress, const std::atomic<bool>& cancelled) {
  const fs::path blob = cache.blob_path(file.etag);
  FileLock lock(cache.lock_path(file.etag));
  std::error_code error;
  if (fs::exists(blob, error)) {  // another process wrote it while this one waited for the lock
    progress.found_complete(file.filename, file.size);
    return;
  }

  const fs::path partial = partial_path(cache, file);
  fs::create_directories(blob.parent_path(), error);
  PartialFile out(partial);
  uint64_t have = partial_download_bytes(cache, file);
  if (have > file.size) {
    out.truncate();
    have = 0;
  }
  Sha256 hash;
  if (file.is_lfs && have > 0) out.hash_contents(hash);
  progress.start(file.filename, file.size, have);

  std::string last_error;
  for (int attempt = 1; attempt <= max_attempts && have < file.size; ++attempt) {
    if (attempt > 1) {
      log::warning(str_cat("retrying ", file.filename, " at byte ", have, " after: ", last_error));
      std::this_thread::sleep_for(std::chrono::milliseconds(250 * (attempt - 1)));
    }
    if (cancelled) fail("download of ", file.filename, " cancelled");
    HttpRequest request = client.download_request(file);
    if (have > 0) request.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
    bool first_chunk = true;
    auto write = [&](long status, std::string_view chunk) {
      if (cancelled) fail("download of ", file.filename, " cancelled");
      if (first_chunk && status == 200 && have > 0) {
        out.truncate();
        hash.reset();
        have = 0;
        progress.restart(file.filename);
      }
      first_chunk = false;
      if (have + chunk.size() > file.size)
        fail(file.download_url, " sent more than the ", file.size, " bytes the hub announced for ", file.filename);
      out.append(chunk, have, file.size);
      if (file.is_lfs) hash.update(chunk);
      have += chunk.size();
      progress.advance(file.filename, chunk.size());
    };
    try {
      HttpResponse response = http_download(request, write);
      if (response.status == 416) {  // the partial file does not fit what the server has now
        out.truncate();
        hash.reset();
        have = 0;
        progress.restart(file.filename);
        throw TransportError(str_cat(file.download_url, " could not resume at the partial file's size"));
      }
      if (response.status != 200 && response.status != 206)
        client.fail_response(response, request.url, file.commit, file.filename);
      if (have < file.size) throw TransportError(str_cat(file.download_url, ": the server closed the transfer early"));
    } catch (const TransportError& transport_error) {
      last_error = transport_error.what();
    }
  }
  if (have < file.size)
    fail("downloading ", file.filename, " of '", client.repo_id(), "' was interrupted after ", have, " of ", file.size,
         " bytes (", last_error, "). The partial download is kept in ", partial.string(),
         ": run the same command again to resume it");

  out.sync();
  if (file.is_lfs) {
    const std::string digest = hash.hex_digest();
    if (digest != file.etag) {
      fs::remove(partial, error);
      fail(file.filename, " of '", client.repo_id(), "' arrived corrupt: its sha256 is ", digest, " but the hub lists ",
           file.etag, ". The download was discarded; run the command again, and if this repeats, the server at ",
           client.settings().endpoint, " (HF_ENDPOINT) is serving bad data");
    }
  }
  fs::rename(partial, blob, error);
  if (error) fail("cannot move ", partial.string(), " to ", blob.string(), ": ", error.message());
  progress.finish(file.filename);
}

}  // namespace shardlm::io::hub
