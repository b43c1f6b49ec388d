// A GGUF file: header, metadata, tensor table, data. Every tensor the table admits is
// read end to end, and decoded where its type is readable, so an offset past the data
// or a block read past a tensor is an ASan finding.
#include "fuzz_util.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  return fuzz::run_input([&] {
    io::ByteRegion region{nullptr, {reinterpret_cast<const std::byte*>(data), size}};
    const io::GgufFile file = io::GgufFile::parse(region, "fuzz.gguf");
    for (const io::GgufTensorInfo& info : file.tensors()) {
      uint8_t sum = 0;
      for (std::byte byte : file.tensor_bytes(info.name)) sum += static_cast<uint8_t>(byte);
      (void)sum;
      // Decoding allocates 4 bytes a value: only small tensors, as real blocks are small.
      if (info.type.readable && info.elements <= (int64_t{1} << 20)) file.dequantized(info.name);
    }
  });
}
