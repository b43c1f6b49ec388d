// An OpenAI API request body (server/request.h), as /v1/completions and as
// /v1/chat/completions. The expected refusal is an ApiError with a 4xx status, whose
// error object must serialize; any other exception, or a 5xx, is a finding.
#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "server/completion.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm::server;
  const std::string_view body = shardlm::fuzz::as_text(data, size);
  for (Endpoint endpoint : {Endpoint::completions, Endpoint::chat_completions}) {
    try {
      const CompletionRequest request = parse_request(body, endpoint);
      if (request.n < 1 || request.n > max_choices || request.top_logprobs < 0 ||
          request.top_logprobs > max_top_logprobs || static_cast<int64_t>(request.stop.size()) > max_stop_sequences) {
        std::fprintf(stderr, "parse_request accepted a value out of its documented range\n");
        std::abort();
      }
    } catch (const ApiError& error) {
      if (error.status < 400 || error.status >= 500) {
        std::fprintf(stderr, "parse_request answered bad input with status %d: %s\n", error.status, error.what());
        std::abort();
      }
      (void)json_text(error_body(error));
    }
  }
  return 0;
}
