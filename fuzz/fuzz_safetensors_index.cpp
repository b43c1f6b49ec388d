// model.safetensors.index.json beside one valid shard: the weight map may name missing
// shards, odd paths or tensors the shard lacks; every tensor it admits is read.
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors.h"

namespace {

// A shard holding one float32 tensor "w" of shape [2].
std::vector<std::byte> one_tensor_shard() {
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<std::byte> bytes(8 + header.size() + 8, std::byte{0});
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::byte>(length >> (8 * i));
  for (size_t i = 0; i < header.size(); ++i) bytes[8 + i] = static_cast<std::byte>(header[i]);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  static const std::vector<std::byte> shard = one_tensor_shard();
  return fuzz::run_input([&] {
    io::ModelFiles files = io::ModelFiles::embedded(
        "<fuzz>", {{"model.safetensors.index.json", {reinterpret_cast<const std::byte*>(data), size}},
                   {"model-00001-of-00001.safetensors", shard}});
    io::Checkpoint checkpoint = io::Checkpoint::open(files);
    for (const std::string& name : checkpoint.names()) (void)checkpoint.tensor(name).nbytes();
  });
}
