#include "io/hub/hub_client.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardlm::io::hub {
namespace {

constexpr int max_hub_redirects = 10;

std::string normalized_etag(std::string etag) {
  if (etag.starts_with("W/")) etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// "https://host:port/a/b" -> "https://host:port".
std::string origin_of(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  size_t path = url.find('/', scheme_end + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

// A Location header made absolute against the URL that answered with it.
std::string redirect_target(const std::string& url, const std::string& location) {
  if (location.starts_with("http://") || location.starts_with("https://")) return location;
  if (location.starts_with("//")) return url.substr(0, url.find("://") + 1) + location;
  if (location.starts_with("/")) return origin_of(url) + location;
  return url.substr(0, url.rfind('/') + 1) + location;
}

uint64_t parse_size(const std::string& text, const std::string& url) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    fail("the hub sent no valid size (X-Linked-Size or Content-Length: '", text, "') for ", url,
         "; is HF_ENDPOINT a Hugging Face hub?");
  return value;
}

}  // namespace

HubClient::HubClient(HubSettings settings, std::string repo_id)
    : settings_(std::move(settings)), repo_id_(std::move(repo_id)) {}

std::vector<std::string> HubClient::hub_headers() const {
  std::vector<std::string> headers = {"Accept-Encoding: identity"};
  if (settings_.token) headers.push_back("Authorization: Bearer " + *settings_.token);
  return headers;
}

std::string HubClient::resolve_url(const std::string& revision, const std::string& filename) const {
  return settings_.endpoint + "/" + repo_id_ + "/resolve/" + url_escape(revision, false) + "/" +
         url_escape(filename, true);
}

std::optional<FileMetadata> HubClient::file_metadata(const std::string& revision, const std::string& filename) const {
  HttpRequest request{.url = resolve_url(revision, filename),
                      .headers = hub_headers(),
                      .connect_timeout_seconds = settings_.metadata_timeout_seconds,
                      .total_timeout_seconds = settings_.metadata_timeout_seconds};
  HttpResponse response = http_head(request);
  // Redirects within the hub (a renamed repository) are followed. One to another
  // host (a CDN) is not: it carries the metadata, and the token must stay on the hub.
  std::string target;
  for (int redirects = 0; response.status >= 300 && response.status < 400; ++redirects) {
    if (response.header("location").empty()) break;
    target = redirect_target(request.url, response.header("location"));
    if (origin_of(target) != origin_of(request.url)) break;
    if (redirects == max_hub_redirects) fail(request.url, " redirects more than ", redirects, " times");
    request.url = target;
    response = http_head(request);
  }
  if (response.status >= 400) {
    const std::string error_code = response.header("x-error-code");
    if (response.status == 404 && (error_code == "EntryNotFound" || error_code.empty())) return std::nullopt;
    fail_response(response, request.url, revision, filename);
  }

  FileMetadata file;
  file.filename = filename;
  file.commit = response.header("x-repo-commit");
  std::string linked_etag = response.header("x-linked-etag");
  file.is_lfs = !linked_etag.empty();
  file.etag = normalized_etag(file.is_lfs ? linked_etag : response.header("etag"));
  const bool redirected = response.status >= 300 && !response.header("location").empty();
  const std::string size = response.header("x-linked-size");
  file.size = parse_size(size.empty() && !redirected ? response.header("content-length") : size, request.url);
  file.download_url = redirected ? target : request.url;
  if (file.commit.empty() || file.etag.empty())
    fail(request.url, " answered without ", file.commit.empty() ? "X-Repo-Commit" : "an ETag",
         ", so it cannot be cached: HF_ENDPOINT (", settings_.endpoint, ") must be a Hugging Face hub or mirror");
  return file;
}

RepoListing HubClient::list_files(const std::string& revision) const {
  const std::string url = settings_.endpoint + "/api/models/" + repo_id_ + "/revision/" + url_escape(revision, false);
  HttpResponse response = http_get({.url = url,
                                    .headers = hub_headers(),
                                    .connect_timeout_seconds = settings_.metadata_timeout_seconds,
                                    .stall_timeout_seconds = settings_.metadata_timeout_seconds});
  if (response.status != 200) fail_response(response, url, revision, "");
  RepoListing listing;
  try {
    nlohmann::json info = nlohmann::json::parse(response.body);
    listing.commit = info.at("sha").get<std::string>();
    for (const nlohmann::json& sibling : info.at("siblings")) listing.files.push_back(sibling.at("rfilename"));
  } catch (const nlohmann::json::exception& error) {
    fail(url, " did not answer with a repository listing (", error.what(),
         "); HF_ENDPOINT must be a Hugging Face hub or mirror");
  }
  return listing;
}

HttpRequest HubClient::download_request(const FileMetadata& file) const {
  std::vector<std::string> headers = {"Accept-Encoding: identity"};
  if (settings_.token && origin_of(file.download_url) == origin_of(settings_.endpoint))
    headers.push_back("Authorization: Bearer " + *settings_.token);
  return {.url = file.download_url,
          .headers = std::move(headers),
          .connect_timeout_seconds = settings_.download_timeout_seconds,
          .stall_timeout_seconds = settings_.download_timeout_seconds};
}

void HubClient::fail_response(const HttpResponse& response, const std::string& url, const std::string& revision,
                              const std::string& filename) const {
  const long status = response.status;
  const std::string code = response.header("x-error-code");
  const std::string server_message = response.header("x-error-message");
  const std::string said = server_message.empty() ? "" : " The hub said: " + server_message;
  const std::string page = settings_.endpoint + "/" + repo_id_;
  const std::string token_advice =
      settings_.token ? str_cat("the token from ", settings_.token_source, " was sent and lacks access")
                      : str_cat("no token was sent: set HF_TOKEN to an access token, or write it to ",
                                settings_.token_path.string());
  const std::string what = filename.empty() ? "'" + repo_id_ + "'" : filename + " of '" + repo_id_ + "'";

  if (code == "GatedRepo") {
    if (settings_.token)
      fail("'", repo_id_, "' is a gated model and the token from ", settings_.token_source,
           " has no access to it (HTTP ", status, "): request access at ", page, " and wait for approval.", said);
    fail("'", repo_id_, "' is a gated model (HTTP ", status, "): accept its conditions at ", page,
         ", then set HF_TOKEN to an access token of that account, or write it to ", settings_.token_path.string(),
         ".", said);
  }
  if (code == "RepoNotFound")
    fail("model '", repo_id_, "' was not found on ", settings_.endpoint, " (HTTP ", status,
         "). Check the id (it is case-sensitive, 'org/name'); if the repository is "
         "private, ", token_advice, ".", said);
  if (code == "RevisionNotFound")
    fail("revision '", revision, "' does not exist in '", repo_id_, "' (HTTP ", status,
         "): pass an existing branch, tag or commit hash with --revision.", said);
  if (code == "EntryNotFound" || (status == 404 && !filename.empty()))
    fail("'", repo_id_, "' has no file ", filename, " at revision '", revision, "' (HTTP ", status, ").", said);
  if (status == 401 || status == 403)
    fail("the hub refused access to ", what, " (HTTP ", status, "); ", token_advice, ". See ", page, ".", said);
  if (status == 404)
    fail("model '", repo_id_, "' or its revision '", revision, "' was not found at ", url,
         " (HTTP 404). Check the id and --revision.", said);
  if (status == 429)
    throw TransportError(str_cat("the hub is rate-limiting requests for ", what,
                                 " (HTTP 429): wait a minute and retry; a token (HF_TOKEN) raises the limit.", said));
  if (status >= 500)
    throw TransportError(str_cat("the hub failed to serve ", what, " (HTTP ", status, " from ", url,
                                 "): retry later.", said));
  fail("unexpected HTTP ", status, " from ", url, " for ", what, ".", said);
}

}  // namespace shardlm::io::hub
