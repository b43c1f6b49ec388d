#pragma once
// The pjrt backend: a Backend over a PJRT plugin (XLA:CPU, XLA:GPU, libtpu). Compiled
// graphs run as one StableHLO program each (compiles_graphs()); the op methods compile a
// one-op program per shape, for eager mode and the consistency tests. Device tensors are
// handles to DeviceStorage (device_storage.h). With BackendOptions::partitions N > 1 every
// program spans devices 0..N-1 as one SPMD program: tensor parallelism without processes.

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/pjrt/device_storage.h"
#include "backends/pjrt/pjrt_client.h"

namespace shardlm::backends::pjrt {

// "pjrt" (the plugin named by --pjrt-plugin or SHARDLM_PJRT_PLUGIN) or "tpu" (libtpu).
struct PjrtTarget {
  std::string kind = "pjrt";
  int device_index = 0;
};
std::unique_ptr<Backend> create_backend(const PjrtTarget& target, const BackendOptions& options);

// The plugin library for `kind`, found as docs/PJRT.md says; "" when none is found, with
// `searched` saying where it looked.
std::string find_plugin(const std::string& kind, const std::string& explicit_path, std::string* searched = nullptr);
// The backend's row in `shardlm devices`: plugin, platform, versions, device count, or the
// plugin's own error. Creates (and keeps) a client.
BackendInfo plugin_info(const std::string& kind, const std::string& explicit_path = "");

}  // namespace shardlm::backends::pjrt
