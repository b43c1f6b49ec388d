// A safetensors file: length prefix, JSON header, data section. Every tensor the header
// admits is viewed and read end to end, so an offset past the data is an ASan finding.
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  return fuzz::run_input([&] {
    io::ByteRegion region{nullptr, {reinterpret_cast<const std::byte*>(data), size}};
    io::SafetensorsFile file = io::SafetensorsFile::parse(region, "fuzz.safetensors");
    for (const std::string& name : file.names()) {
      Tensor tensor = file.tensor(name);
      const auto* bytes = static_cast<const volatile uint8_t*>(tensor.raw());
      uint8_t sum = 0;
      for (size_t i = 0; i < tensor.nbytes(); ++i) sum += bytes[i];
      (void)sum;
    }
  });
}
