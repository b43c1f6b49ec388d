// A chat template from a stranger's tokenizer_config.json: parsed, then rendered over a
// fixed conversation with tools, under tight limits so that a runaway template is
// refused quickly rather than slowing the fuzzer.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "What is 2 + 2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "simple",
       "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "4"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])");
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}])");
  return fuzz::run_input([&] {
    tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::parse(fuzz::as_text(data, size), "chat_template");
    tokenizer::ChatRenderOptions options;
    options.add_generation_prompt = size % 2 == 0;
    options.tools = tools;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.strftime_now_time = std::tm{};
    options.max_output_bytes = 1 << 20;
    options.max_steps = 100'000;
    (void)chat.render(messages, options);
  });
}
