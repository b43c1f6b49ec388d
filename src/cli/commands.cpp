#include "cli/commands.h"

namespace shardlm::cli {

void add_commands(CLI::App& app) {
  app.description(
      "shardlm: run Hugging Face causal language models (Llama, Qwen2, Qwen3, GLM-4, Gemma 3) natively,\n"
      "from a checkpoint directory (config.json, safetensors, tokenizer.json), a Hugging Face model id or a\n"
      "llama.cpp GGUF file. Without --model, commands use the built-in stories260K model.");
  app.set_version_flag("--version", "shardlm 0.1.0");
  app.require_subcommand(1);
  add_generate_command(app);
  add_devices_command(app);
  add_download_command(app);
  add_chat_command(app);
  add_serve_command(app);
  add_tokenize_command(app);
  add_perplexity_command(app);
  add_bench_command(app);
  add_quantize_command(app);
  add_random_model_command(app);
  add_launch_command(app);
  add_compile_command(app);
}

}  // namespace shardlm::cli
