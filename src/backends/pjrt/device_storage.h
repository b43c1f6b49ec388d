#pragma once
// What a Tensor on a pjrt device points at (Tensor::owner()): one PJRT buffer per device
// of the program's partitions, either the whole tensor on each (split_dim -1) or its
// split_dim cut into equal parts, part d on device d (the SPMD layout XLA's partitioner
// reads from the parameter's mhlo.sharding). Buffers are replaced, never written: PJRT
// buffers are immutable, and a donated one is consumed by the program it went into.

#include <memory>
#include <string>
#include <vector>

#include "backends/pjrt/pjrt_client.h"

namespace shardlm::backends::pjrt {

struct DeviceStorage {
  Shape shape;
  DType dtype = DType::f32;
  int split_dim = -1;
  std::vector<std::unique_ptr<Buffer>> buffers;  // empty until something writes the tensor
  // The last host upload of a small i32 tensor (cache positions): checked against the
  // cache before a program runs, since a plugin would clamp an out-of-range write.
  std::vector<int32_t> host_copy;
};

// `host` (the whole tensor, storage.shape) onto devices first_device.. of `partitions`.
void upload(Client& client, DeviceStorage& storage, const void* host, int first_device, int partitions);
// The whole tensor into `host` (storage.shape's bytes).
void download(const DeviceStorage& storage, void* host);
// `mhlo.sharding = "..."` for the storage's layout over `partitions` devices; "" for one.
std::string sharding_attribute(const DeviceStorage& storage, int partitions);

}  // namespace shardlm::backends::pjrt
