// The default model (stories260K, MIT, data/models/stories260K) is linked into the
// binary, so `shardlm generate` works from any directory with no download.
#include "io/model_resolution.h"

#define SHARDLM_EMBED(symbol, file)                                          \
  asm(".section .rodata\n.balign 64\n.global " #symbol "\n" #symbol ":\n" \
      ".incbin \"" SHARDLM_EMBEDDED_MODEL_DIR "/" file "\"\n"             \
      ".global " #symbol "_end\n" #symbol "_end:\n.previous\n");          \
  extern "C" const std::byte symbol[];                                       \
  extern "C" const std::byte symbol##_end[];

SHARDLM_EMBED(shardlm_embedded_config, "config.json")
SHARDLM_EMBED(shardlm_embedded_generation_config, "generation_config.json")
SHARDLM_EMBED(shardlm_embedded_weights, "model.safetensors")
SHARDLM_EMBED(shardlm_embedded_tokenizer, "tokenizer.json")
SHARDLM_EMBED(shardlm_embedded_tokenizer_config, "tokenizer_config.json")

namespace shardlm::io {
namespace {
std::span<const std::byte> bytes(const std::byte* begin, const std::byte* end) {
  return {begin, static_cast<size_t>(end - begin)};
}
}  // namespace

ModelFiles embedded_default_model() {
  return ModelFiles::embedded(
      std::string(default_model_id),
      {
          {"config.json", bytes(shardlm_embedded_config, shardlm_embedded_config_end)},
          {"generation_config.json",
           bytes(shardlm_embedded_generation_config, shardlm_embedded_generation_config_end)},
          {"model.safetensors", bytes(shardlm_embedded_weights, shardlm_embedded_weights_end)},
          {"tokenizer.json", bytes(shardlm_embedded_tokenizer, shardlm_embedded_tokenizer_end)},
          {"tokenizer_config.json", bytes(shardlm_embedded_tokenizer_config, shardlm_embedded_tokenizer_config_end)},
      });
}

}  // namespace shardlm::io
