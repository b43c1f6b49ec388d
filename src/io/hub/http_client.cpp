#include "io/hub/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>

namespace shardlm::io::hub {
namespace {

// Bounds on what is held in memory, so a misbehaving server cannot fill it: enough of
// an error page to quote, and of a document such as a repository listing.
constexpr size_t max_error_body_bytes = 1 << 16;
constexpr size_t max_document_bytes = 64 << 20;

struct Transfer {
  HttpResponse response;
  const BodyWriter* writer = nullptr;
  std::string_view url;
  CURL* handle = nullptr;
  std::exception_ptr writer_error;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    transfer.response.headers.clear();  // a new response after a redirect
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  transfer.response.headers[name] = std::string(value);
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(transfer.handle, CURLINFO_RESPONSE_CODE, &status);
  if (transfer.writer != nullptr && (status == 200 || status == 206)) {
    try {
      (*transfer.writer)(status, std::string_view(data, bytes));
    } catch (...) {
      transfer.writer_error = std::current_exception();
      return 0;  // makes curl abort with CURLE_WRITE_ERROR
    }
    return bytes;
  }
  std::string& body = transfer.response.body;
  const size_t limit = transfer.writer == nullptr ? max_document_bytes : max_error_body_bytes;
  if (body.size() + bytes > limit && transfer.writer == nullptr) {
    transfer.writer_error = std::make_exception_ptr(
        Error(str_cat(transfer.url, " sent more than ", limit, " bytes where a small document was expected")));
    return 0;
  }
  body.append(data, std::min(bytes, limit - std::min(limit, body.size())));
  return bytes;
}

void initialize_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) fail("libcurl failed to initialize");
  });
}

HttpResponse perform(const HttpRequest& request, bool head, bool follow_redirects, const BodyWriter* writer) {
  initialize_curl_once();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), &curl_easy_cleanup);
  if (!handle) fail("libcurl could not create a request for ", request.url);
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, &curl_slist_free_all);
  for (const std::string& header : request.headers) {
    curl_slist* appended = curl_slist_append(headers.get(), header.c_str());
    if (appended == nullptr) fail("out of memory building the request for ", request.url);
    headers.release();
    headers.reset(appended);
  }

  Transfer transfer;
  transfer.writer = writer;
  transfer.url = request.url;
  transfer.handle = handle.get();
  char error_text[CURL_ERROR_SIZE] = {};
  CURL* curl = handle.get();
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "shardlm/0.1.0");
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_NOBODY, head ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // signals are not thread-safe; downloads run in parallel
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_seconds);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, request.total_timeout_seconds);
  if (request.stall_timeout_seconds > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, request.stall_timeout_seconds);
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  // Larger reads mean fewer writes and progress updates for multi-gigabyte shards.
  if (writer != nullptr) curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);

  CURLcode code = curl_easy_perform(curl);
  if (transfer.writer_error) std::rethrow_exception(transfer.writer_error);
  if (code != CURLE_OK) {
    const char* detail = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);
    throw TransportError(str_cat(request.url, ": ", detail));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &transfer.response.status);
  return std::move(transfer.response);
}

}  // namespace

std::string HttpResponse::header(const std::string& lower_case_name) const {
  auto found = headers.find(lower_case_name);
  return found == headers.end() ? std::string() : found->second;
}

HttpResponse http_head(const HttpRequest& request) { return perform(request, true, false, nullptr); }

HttpResponse http_get(const HttpRequest& request) { return perform(request, false, true, nullptr); }

HttpResponse http_download(const HttpRequest& request, const BodyWriter& write) {
  return perform(request, false, true, &write);
}

std::string url_escape(std::string_view text, bool keep_slashes) {
  static const char* const hex = "0123456789ABCDEF";
  std::string escaped;
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.' || c == '~' || (keep_slashes && c == '/');
    if (unreserved) {
      escaped += static_cast<char>(c);
    } else {
      escaped += '%';
      escaped += hex[c >> 4];
      escaped += hex[c & 15];
    }
  }
  return escaped;
}

}  // namespace shardlm::io::hub
