// `shardlm chat`: an interactive conversation through the model's chat template.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/model_options.h"

namespace shardlm::cli {
namespace {

struct ChatArguments {
  ModelArguments model;
  SamplingArguments sampling;
  std::string system;
  std::optional<bool> enable_thinking;
};

void run_chat(const ChatArguments& args) {
  GenerationConfig config = to_generation_config(args.sampling);
  const auto check = [](const io::ModelFiles& files, const std::optional<AutoTokenizer>& tokenizer) {
    if (!tokenizer) fail(files.location(), " has no tokenizer.json: chat needs one");
    if (!tokenizer->has_chat_template())
      fail(files.location(), ": tokenizer_config.json has no chat_template, so this is not a chat model; "
           "use `shardlm generate`");
  };
  LoadedModel loaded = load_model(args.model, check);
  // transformers' max_length default (20, prompt included) is shorter than any templated
  // chat prompt; give replies room unless the user or the model says otherwise.
  if (!config.max_new_tokens && !loaded.model.generation_config().max_new_tokens) config.max_new_tokens = 512;
  const AutoTokenizer& tokenizer = *loaded.tokenizer;
  ChatTemplateOptions options{.add_generation_prompt = true};
  if (args.enable_thinking) options.extra_variables_json = nlohmann::json{{"enable_thinking", *args.enable_thinking}}.dump();

  nlohmann::json messages = nlohmann::json::array();
  if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
  std::fprintf(stderr, "Chatting with %s. Type /reset to start over, /exit or Ctrl-D to quit.\n",
               loaded.files.location().c_str());
  for (std::string line;;) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages.erase(messages.begin() + (args.system.empty() ? 0 : 1), messages.end());
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string reply;
    try {
      const std::string prompt = tokenizer.apply_chat_template_json(messages.dump(), options);
      // As apply_chat_template(tokenize=True): the template already holds the special tokens.
      BatchEncoding inputs = tokenizer(prompt, /*add_special_tokens=*/false);
      loaded.model.generate(
          inputs, config,
          [&](size_t, int64_t, std::string_view text) {
            reply += text;
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
          },
          &tokenizer);
    } catch (const Error& error) {
      // One failed turn (a prompt too long for the model, say) does not end the conversation.
      std::fprintf(stderr, "shardlm: error: %s\n", error.what());
      messages.erase(messages.end() - 1);
      continue;
    }
    std::printf("\n");
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArguments>();
  CLI::App* command = app.add_subcommand(
      "chat",
      "Talk with a chat model: each line you type is a user message; replies stream back.\n"
      "The prompt is rendered with the model's chat_template (tokenizer_config.json).");
  add_model_options(*command, args->model);
  add_sampling_options(*command, args->sampling);
  command->add_option("--system", args->system, "A system message that starts the conversation");
  command->add_option("--enable-thinking", args->enable_thinking,
                      "Passed to the template as enable_thinking (Qwen3: true or false)");
  command->callback([args] { run_chat(*args); });
}

}  // namespace shardlm::cli
