// Decodes every tensor of a GGUF file with shardlm's reader and block decoders, and prints
// one JSON object a tensor (name, type, shape, sum and sum of squares of the values) for
// bench/gguf_decode_check.py to compare with Python gguf's decoding of the same file.
//   build/bench/gguf_decode FILE.gguf
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "io/gguf.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_decode FILE.gguf\n");
    return 2;
  }
  try {
    const shardlm::io::GgufFile file = shardlm::io::GgufFile::open(argv[1]);
    for (const shardlm::io::GgufTensorInfo& info : file.tensors()) {
      if (!info.type.readable) {
        std::printf("{\"name\": \"%s\", \"type\": \"%s\", \"unreadable\": true}\n", info.name.c_str(), info.type.name);
        continue;
      }
      const shardlm::Tensor values = file.dequantized(info.name);
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < values.numel(); ++i) {
        const double value = values.data<float>()[i];
        sum += value;
        squares += value * value;
      }
      std::printf("{\"name\": \"%s\", \"type\": \"%s\", \"shape\": \"%s\", \"sum\": %.9g, \"squares\": %.9g}\n",
                  info.name.c_str(), info.type.name, info.shape().to_string().c_str(), sum, squares);
    }
  } catch (const shardlm::Error& error) {
    std::fprintf(stderr, "gguf_decode: %s\n", error.what());
    return 1;
  }
}
