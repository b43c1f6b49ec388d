// config.json, then the same bytes as generation_config.json for the config it gave (or
// for a valid Llama config when it gave none).
#include "fuzz_util.h"
#include "io/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  static const io::ModelConfig fallback = io::parse_model_config(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100})",
      "fallback config.json");
  const std::string text(fuzz::as_text(data, size));
  io::ModelConfig config = fallback;
  fuzz::run_input([&] { config = io::parse_model_config(text, "config.json"); });
  return fuzz::run_input([&] {
    io::ModelFiles files = io::ModelFiles::embedded(
        "<fuzz>", {{"generation_config.json", {reinterpret_cast<const std::byte*>(data), size}}});
    (void)io::load_generation_config(files, config);
  });
}
