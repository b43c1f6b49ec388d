// `shardlm random-model`: a checkpoint of random weights for any config.json, to
// benchmark real model shapes without downloading weights.
#include <filesystem>
#include <fstream>

#include "api/impl.h"
#include "cli/commands.h"
#include "models/random_weights.h"

namespace shardlm::cli {
namespace {

struct RandomModelArguments {
  std::string config, output, dtype = "bfloat16";
  uint64_t seed = 0;
};

void run(const RandomModelArguments& args) {
  std::ifstream in(args.config, std::ios::binary);
  if (!in) fail("cannot read --config ", args.config);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const io::ModelConfig config = io::parse_model_config(text, args.config);
  const DType dtype = parse_dtype(args.dtype);
  if (!is_floating(dtype)) fail("--dtype ", args.dtype, ": use float32, bfloat16 or float16");
  std::filesystem::create_directories(args.output);
  const std::map<std::string, Tensor> tensors = models::random_weights(config, dtype, args.seed);
  io::write_safetensors((std::filesystem::path(args.output) / "model.safetensors").string(), tensors,
                        {{"format", "pt"}});
  std::filesystem::copy_file(args.config, std::filesystem::path(args.output) / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  size_t bytes = 0;
  for (const auto& [name, tensor] : tensors) bytes += tensor.nbytes();
  std::printf("wrote %zu tensors (%zu bytes of %s) and config.json to %s\n", tensors.size(), bytes,
              std::string(dtype_name(dtype)).c_str(), args.output.c_str());
}

}  // namespace

void add_random_model_command(CLI::App& app) {
  auto args = std::make_shared<RandomModelArguments>();
  CLI::App* command = app.add_subcommand(
      "random-model", "Write a checkpoint of random weights (model.safetensors + config.json) for a config.json");
  command->add_option("--config,-c", args->config, "config.json of the architecture and sizes to build")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--output,-o", args->output, "Directory to write (created if missing)")->required();
  command->add_option("--dtype", args->dtype, "float32, bfloat16 or float16")->capture_default_str();
  command->add_option("--seed", args->seed, "The same seed writes the same weights")->capture_default_str();
  command->callback([args] { run(*args); });
}

}  // namespace shardlm::cli
