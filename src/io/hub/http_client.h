#pragma once
// The few HTTP requests the hub needs, over libcurl. Nothing here knows the hub's
// rules; hub_client.h does.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace shardlm::io::hub {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers{};  // "Name: value"
  long connect_timeout_seconds = 10;
  long total_timeout_seconds = 0;  // 0: no limit
  long stall_timeout_seconds = 0;  // give up when no byte arrives for this long; 0: never
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // of the last response; names in lower case
  std::string body;                            // kept only for error responses and http_get
  std::string header(const std::string& lower_case_name) const;
};

// No complete response arrived: the name did not resolve, the connection was refused,
// reset or cut, or it stalled. The request may succeed if retried.
class TransportError : public Error {
 public:
  using Error::Error;
};

// Does not follow redirects: the hub's metadata lives in the redirect response itself.
HttpResponse http_head(const HttpRequest& request);
// Follows redirects; the body is kept in memory, so only for small documents.
HttpResponse http_get(const HttpRequest& request);

// Follows redirects. `write` receives the body of a 200 or 206 response in order, with
// that status; an exception it throws aborts the transfer and is rethrown here.
// Other statuses come back with their body in the response.
using BodyWriter = std::function<void(long status, std::string_view chunk)>;
HttpResponse http_download(const HttpRequest& request, const BodyWriter& write);

// Percent-encodes all but RFC 3986 unreserved characters; `keep_slashes` for paths.
std::string url_escape(std::string_view text, bool keep_slashes);

}  // namespace shardlm::io::hub
