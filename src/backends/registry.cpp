#include <charconv>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/matmul_kernels.h"
#include "core/logging.h"
#ifdef SHARDLM_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace shardlm::backends {
namespace {

BackendInfo cuda_info() {
#ifdef SHARDLM_HAVE_CUDA
  return cuda::device_info();
#else
  return {"cuda", false, 0, "this build has no CUDA backend (no CUDA toolkit was found when it was built)"};
#endif
}

// N of "cuda:N"; 0 for a bare "cuda".
int cuda_index(const std::string& device_map) {
  if (device_map == "cuda") return 0;
  const std::string digits = device_map.substr(5);
  int index = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (device_map[4] != ':' || digits.empty() || error != std::errc() || end != digits.data() + digits.size() || index < 0)
    fail("device_map '", device_map, "': write \"cuda\" or \"cuda:N\" with N a device index");
  return index;
}

}  // namespace

std::vector<BackendInfo> list_backends() {
  unsigned threads = std::thread::hardware_concurrency();
  std::string tables;
  for (const cpu::MatmulKernels* table : cpu::available_matmul_kernels())
    tables += str_cat(tables.empty() ? "" : ", ", table->isa);
  return {{"cpu", true, 1,
           str_cat(threads, " hardware threads; matmul kernels ", cpu::matmul_kernels().isa, " (of ", tables, ")")},
          cuda_info()};
}

std::unique_ptr<Backend> create_backend(const std::string& device_map, int threads) {
  if (device_map == "cpu" || device_map == "cpu:0") return create_cpu_backend(threads);
  if (device_map == "auto") {
    const BackendInfo cuda = cuda_info();
#ifdef SHARDLM_HAVE_CUDA
    if (cuda.available) {
      log::notice(str_cat("device_map=auto: using cuda:0 (", cuda.detail, ")"));
      return cuda::create_backend(0);
    }
#endif
    log::notice(str_cat("device_map=auto: using cpu (", cuda.detail, ")"));
    return create_cpu_backend(threads);
  }
  if (device_map.starts_with("cuda")) {
    [[maybe_unused]] const int index = cuda_index(device_map);
    const BackendInfo cuda = cuda_info();
    if (!cuda.available) fail("device_map '", device_map, "': ", cuda.detail, "; use \"cpu\" or \"auto\"");
#ifdef SHARDLM_HAVE_CUDA
    return cuda::create_backend(index);
#endif
  }
  fail("unknown device_map '", device_map, "': use \"cpu\", \"cuda\", \"cuda:N\" or \"auto\"");
}

}  // namespace shardlm::backends
