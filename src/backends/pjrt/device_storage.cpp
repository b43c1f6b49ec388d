#include "backends/pjrt/device_storage.h"

#include <cstring>

namespace shardlm::backends::pjrt {
namespace {

// Rows of a split: the product of the dims before split_dim, each holding `parts` runs of
// `run_bytes` (one per device) back to back.
struct SplitLayout {
  int64_t outer = 1;
  size_t run_bytes = 0;
  Shape part;
};

SplitLayout layout_of(const DeviceStorage& storage, int parts) {
  SplitLayout layout{.part = storage.shape};
  int64_t inner = 1;
  for (size_t i = 0; i < storage.shape.rank(); ++i) {
    if (static_cast<int>(i) < storage.split_dim) layout.outer *= storage.shape[i];
    if (static_cast<int>(i) > storage.split_dim) inner *= storage.shape[i];
  }
  layout.part[static_cast<size_t>(storage.split_dim)] /= parts;
  layout.run_bytes = static_cast<size_t>(layout.part[static_cast<size_t>(storage.split_dim)] * inner) *
                     dtype_size(storage.dtype);
  return layout;
}

}  // namespace

void upload(Client& client, DeviceStorage& storage, const void* host, int first_device, int partitions) {
  storage.buffers.clear();
  if (storage.split_dim < 0) {
    for (int d = 0; d < partitions; ++d)
      storage.buffers.push_back(client.upload(host, storage.dtype, storage.shape, first_device + d));
    return;
  }
  const SplitLayout layout = layout_of(storage, partitions);
  std::vector<std::byte> part(static_cast<size_t>(layout.outer) * layout.run_bytes);
  const auto* source = static_cast<const std::byte*>(host);
  for (int d = 0; d < partitions; ++d) {
    for (int64_t row = 0; row < layout.outer; ++row)
      std::memcpy(part.data() + row * layout.run_bytes,
                  source + (row * partitions + d) * static_cast<int64_t>(layout.run_bytes), layout.run_bytes);
    storage.buffers.push_back(client.upload(part.data(), storage.dtype, layout.part, first_device + d));
  }
}

void download(const DeviceStorage& storage, void* host) {
  const size_t bytes = static_cast<size_t>(storage.shape.numel()) * dtype_size(storage.dtype);
  if (storage.split_dim < 0) return storage.buffers.at(0)->to_host(host, bytes);
  const int parts = static_cast<int>(storage.buffers.size());
  const SplitLayout layout = layout_of(storage, parts);
  std::vector<std::byte> part(static_cast<size_t>(layout.outer) * layout.run_bytes);
  auto* destination = static_cast<std::byte*>(host);
  for (int d = 0; d < parts; ++d) {
    storage.buffers[d]->to_host(part.data(), part.size());
    for (int64_t row = 0; row < layout.outer; ++row)
      std::memcpy(destination + (row * parts + d) * static_cast<int64_t>(layout.run_bytes),
                  part.data() + row * layout.run_bytes, layout.run_bytes);
  }
}

std::string sharding_attribute(const DeviceStorage& storage, int partitions) {
  if (partitions <= 1) return "";
  if (storage.split_dim < 0) return "mhlo.sharding = \"{replicated}\"";
  std::string tiles, devices;
  for (size_t i = 0; i < storage.shape.rank(); ++i)
    tiles += str_cat(i ? "," : "", static_cast<int>(i) == storage.split_dim ? partitions : 1);
  for (int d = 0; d < partitions; ++d) devices += str_cat(d ? "," : "", d);
  return "mhlo.sharding = \"{devices=[" + tiles + "]" + devices + "}\"";
}

}  // namespace shardlm::backends::pjrt
