#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "core/logging.h"

namespace shardlm::backends {

std::vector<BackendInfo> list_backends() {
  unsigned threads = std::thread::hardware_concurrency();
  return {
      {"cpu", true, 1, str_cat(threads, " hardware threads")},
      {"cuda", false, 0, "this build has no CUDA backend"},
  };
}

std::unique_ptr<Backend> create_backend(const std::string& device_map, int threads) {
  if (device_map == "cpu" || device_map == "cpu:0") return create_cpu_backend(threads);
  if (device_map == "auto") {
    log::notice("device_map=auto: using cpu (no accelerator backend is available in this build)");
    return create_cpu_backend(threads);
  }
  if (device_map.starts_with("cuda"))
    fail("device_map '", device_map, "': this build has no CUDA backend; use \"cpu\" or \"auto\"");
  fail("unknown device_map '", device_map, "': use \"cpu\", \"cuda\", \"cuda:N\" or \"auto\"");
}

}  // namespace shardlm::backends
