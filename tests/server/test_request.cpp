// The request parser: OpenAI's and vLLM's fields read, unknown ones ignored, and every
// bad value an ApiError (400) that names its field.
#include <gtest/gtest.h>

#include "server/request.h"

namespace shardlm::server {
namespace {

ApiError error_of(const std::string& body, Endpoint endpoint = Endpoint::completions) {
  try {
    parse_request(body, endpoint);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ParseRequest, ReadsTheFieldsOpenAiAndVllmName) {
  const CompletionRequest r = parse_request(
      R"({"model": "m", "prompt": ["a", [1, 2]], "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3,
          "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": -0.5, "seed": -1,
          "stop": "x", "n": 2, "logprobs": 3, "echo": true, "stream": true, "stream_options": {"include_usage": true},
          "ignore_eos": true, "min_tokens": 2, "unknown_field": {"anything": [1]}})",
      Endpoint::completions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "a");
  EXPECT_EQ(std::get<std::vector<int64_t>>(r.prompts[1]), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0f);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, static_cast<uint64_t>(-1));
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.logprobs && r.echo && r.stream && r.include_usage && r.ignore_eos);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.min_tokens, 2);
  const CompletionRequest chat = parse_request(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 4, "logprobs": true, "top_logprobs": 2,
          "chat_template_kwargs": {"enable_thinking": false}})",
      Endpoint::chat_completions);
  EXPECT_EQ(chat.messages[0]["content"], "ab");
  EXPECT_EQ(chat.max_tokens, 4);
  EXPECT_EQ(chat.top_logprobs, 2);
  EXPECT_EQ(chat.chat_template_kwargs["enable_thinking"], false);
}

TEST(ParseRequest, BadInputNamesTheField) {
  EXPECT_EQ(error_of("{not json").status, 400);
  EXPECT_EQ(error_of("[1]").status, 400);
  EXPECT_EQ(error_of(std::string(100, '[') + std::string(100, ']')).status, 400);
  EXPECT_EQ(error_of("{}").param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [-1]})").param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": "9"})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 99999999999999})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "a", "temperature": -1})").param, "temperature");
  EXPECT_EQ(error_of(R"({"prompt": "a", "top_p": 0})").param, "top_p");
  EXPECT_EQ(error_of(R"({"prompt": "a", "n": 1000})").param, "n");
  EXPECT_EQ(error_of(R"({"prompt": "a", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(error_of(R"({"prompt": "a", "stop": [""]})").param, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "a", "stream": "yes"})").param, "stream");
  EXPECT_EQ(error_of(R"({"prompt": "a", "max_tokens": 2, "min_tokens": 3})").param, "min_tokens");
  EXPECT_EQ(error_of(R"({"messages": []})", Endpoint::chat_completions).param, "messages");
  EXPECT_EQ(error_of(R"({"messages": [{"content": "x"}]})", Endpoint::chat_completions).param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": 3}]})", Endpoint::chat_completions).param,
            "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                     Endpoint::chat_completions)
                .param,
            "top_logprobs");
}

}  // namespace
}  // namespace shardlm::server
