// A GGUF file: header, metadata, tensor table, data. Every tensor the table admits is
// read end to end, and decoded where its type is readable, so an offset past the data
// or a block read past a tensor is an ASan finding; then the config.json, tokenizer.json
// and tensor map a model would derive from the metadata.
#include "fuzz_util.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "io/gguf_vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  return fuzz::run_input([&] {
    io::ByteRegion region{nullptr, {reinterpret_cast<const std::byte*>(data), size}};
    const auto file = std::make_shared<const io::GgufFile>(io::GgufFile::parse(region, "fuzz.gguf"));
    for (const io::GgufTensorInfo& info : file->tensors()) {
      uint8_t sum = 0;
      for (std::byte byte : file->tensor_bytes(info.name)) sum += static_cast<uint8_t>(byte);
      (void)sum;
      // Decoding allocates 4 bytes a value: only small tensors, as real blocks are small.
      if (info.type.readable && info.elements <= (int64_t{1} << 20)) file->dequantized(info.name);
    }
    // Each derivation on its own: one refusing the metadata must not hide another's finding.
    const auto each = [](const auto& derive) {
      try {
        derive();
      } catch (const Error&) {
      }
    };
    each([&] { io::gguf_config_json(*file); });
    each([&] { io::gguf_tokenizer_files(*file); });
    each([&] {
      const io::GgufWeights weights(file);
      for (const std::string& name : weights.names())
        if (weights.info(name).shape.numel() <= (int64_t{1} << 20)) weights.tensor(name);
    });
  });
}
