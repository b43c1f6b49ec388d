// `shardlm quantize`: writes a checkpoint whose weights are int8 or int4 with float16
// block scales, that loads without requantizing (io/config.h: quantization_config). int4
// is stored as uint8 [out, in / 2], two values a byte (core/quantize.h), since safetensors
// has no four-bit type.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/impl.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/ggml_blocks.h"
#include "core/quantize.h"
#include "models/weights.h"

namespace shardlm::cli {
namespace {

struct QuantizeArguments {
  std::string model, revision = "main", output;
  int bits = 8;
};

// Files of a Hugging Face checkpoint that pass through unchanged.
constexpr const char* companion_files[] = {"generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                           "special_tokens_map.json", "chat_template.jinja", "LICENSE",
                                           "README.md"};

void run(const QuantizeArguments& args) {
  const io::ModelFiles files = io::resolve_model(args.model, {.revision = args.revision});
  const io::ModelConfig config = io::load_model_config(files);
  if (!config.quant_method.empty()) fail(files.path_of("config.json"), " is already quantized (", config.quant_method, ")");
  const io::Checkpoint checkpoint = io::Checkpoint::open(files);
  // The output is checked before the work (on a large model the quantizing takes minutes),
  // and made once the checkpoint has opened.
  const std::filesystem::path output(args.output);
  if (!files.is_embedded() && std::filesystem::exists(output) && std::filesystem::equivalent(output, files.location()))
    fail("--output ", args.output, " is the model's own directory: write the quantized copy elsewhere");
  std::error_code error;
  std::filesystem::create_directories(output, error);
  if (error) fail("cannot create --output ", args.output, ": ", error.message());
  std::map<std::string, Tensor> tensors;
  size_t before = 0, after = 0, quantized = 0, done = 0;
  const bool terminal = ::isatty(::fileno(stderr)) == 1;
  auto last_line = std::chrono::steady_clock::now();
  for (const std::string& name : checkpoint.names()) {
    // Progress on stderr: redrawn in place on a terminal, else a line every ten seconds.
    const auto now = std::chrono::steady_clock::now();
    if (terminal || now - last_line > std::chrono::seconds(10)) {
      std::fprintf(stderr, "%squantizing: %zu of %zu tensors%s", terminal ? "\r" : "", done,
                   checkpoint.names().size(), terminal ? "" : "\n");
      last_line = now;
    }
    ++done;
    Tensor tensor = checkpoint.tensor(name);
    // A GGUF file's quantized weights are requantized from the values they stand for.
    if (checkpoint.from_gguf() && !is_floating(tensor.dtype())) tensor = dequantize_weight(tensor);
    before += tensor.nbytes();
    if (is_floating(tensor.dtype()) && quantizable(tensor.shape())) {
      constexpr int every_core = 0;
      tensor = args.bits == 4 && !keeps_eight_bits_under_int4(name) ? quantize_int4(tensor, every_core)
                                                                     : quantize_int8(tensor, every_core);
      tensors.emplace(models::block_scale_name(name), tensor.block_scales());
      after += tensor.block_scales().nbytes();
      ++quantized;
      if (tensor.dtype() == DType::i4)  // as uint8 [out, in / 2]
        tensor = tensor.view_bytes(0, Shape{tensor.shape()[0], tensor.shape()[1] / 2}, DType::u8);
    }
    after += tensor.nbytes();
    tensors.emplace(name, std::move(tensor));
  }
  if (terminal) std::fprintf(stderr, "\r\033[K");  // the progress line gives way to the summary
  io::write_safetensors((output / "model.safetensors").string(), tensors, {{"format", "pt"}});
  nlohmann::json config_json = nlohmann::json::parse(files.read_text("config.json"));
  config_json["quantization_config"] = {{"quant_method", args.bits == 4 ? io::int4_quant_method : io::int8_quant_method},
                                        {"block_size", Tensor::quant_block}};
  std::ofstream(output / "config.json") << config_json.dump(2) << "\n";
  for (const char* name : companion_files)
    if (files.exists(name)) std::ofstream(output / name, std::ios::binary) << files.read_text(name);
  std::printf("quantized %zu of %zu tensors to int%d: %zu -> %zu bytes, written to %s\n", quantized,
              checkpoint.names().size(), args.bits, before, after, args.output.c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArguments>();
  CLI::App* command = app.add_subcommand(
      "quantize", "Write an int8 or int4 copy of a checkpoint (one float16 scale per 32 weights) that loads as is");
  command->add_option("--model,-m", args->model, "Checkpoint directory or Hugging Face model id")->required();
  command->add_option("--revision", args->revision, "For a model id: branch, tag or commit hash")
      ->capture_default_str();
  command->add_option("--output,-o", args->output, "Directory to write (created if missing)")->required();
  command->add_option("--bits", args->bits,
                      "8: int8 (Q8_0's layout); 4: int4, 4.5 bits a weight with the scale (Q4_0's size, its "
                      "scales fitted for least error; runs on the CPU only)")
      ->capture_default_str()
      ->check(CLI::IsMember({4, 8}));
  command->callback([args] { run(*args); });
}

}  // namespace shardlm::cli
