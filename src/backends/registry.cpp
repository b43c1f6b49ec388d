#include <charconv>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernel_table.h"
#include "core/logging.h"
#include "backends/pjrt/pjrt_backend.h"
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

// N of "KIND:N"; 0 for a bare "KIND".
int device_index(const std::string& device_map, const std::string& kind) {
  if (device_map == kind) return 0;
  const std::string digits = device_map.substr(kind.size() + 1);
  int index = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (device_map[kind.size()] != ':' || digits.empty() || error != std::errc() ||
      end != digits.data() + digits.size() || index < 0)
    fail("device_map '", device_map, "': write \"", kind, "\" or \"", kind, ":N\" with N a device index");
  return index;
}

}  // namespace

std::vector<BackendInfo> list_backends(const std::string& pjrt_plugin) {
  unsigned threads = std::thread::hardware_concurrency();
  std::string tables;
  for (const cpu::CpuKernels* table : cpu::available_cpu_kernels())
    tables += str_cat(tables.empty() ? "" : ", ", table->isa);
  return {{"cpu", true, 1,
           str_cat(threads, " hardware threads; CPU kernels ", cpu::cpu_kernels().isa, " (of ", tables, ")")},
          cuda_info(), pjrt::plugin_info("tpu"), pjrt::plugin_info("pjrt", pjrt_plugin)};
}

std::unique_ptr<Backend> create_backend(const std::string& device_map, const BackendOptions& options) {
  const int threads = options.threads;
  if (device_map == "cpu" || device_map == "cpu:0") return create_cpu_backend(threads);
  for (const char* kind : {"pjrt", "tpu"})
    if (device_map.starts_with(kind)) return pjrt::create_backend({kind, device_index(device_map, kind)}, options);
  if (device_map == "auto") {
    // A TPU first, when libtpu finds chips, as transformers' device_map="auto" would.
    const BackendInfo tpu = pjrt::plugin_info("tpu", options.pjrt_plugin);
    if (tpu.available) {
      log::notice(str_cat("device_map=auto: using tpu:0 (", tpu.detail, ")"));
      return pjrt::create_backend({"tpu", 0}, options);
    }
    log::info(str_cat("device_map=auto: no TPU (", tpu.detail, ")"));
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
    [[maybe_unused]] const int index = device_index(device_map, "cuda");
    const BackendInfo cuda = cuda_info();
    if (!cuda.available) fail("device_map '", device_map, "': ", cuda.detail, "; use \"cpu\" or \"auto\"");
#ifdef SHARDLM_HAVE_CUDA
    return cuda::create_backend(index);
#endif
  }
  fail("unknown device_map '", device_map, "': use \"cpu\", \"cuda[:N]\", \"tpu[:N]\", \"pjrt[:N]\" or \"auto\"");
}

void check_cache_rows(const int32_t* cache_rows, int64_t batch, int64_t slots, const char* op) {
  // Pairwise rather than a set: steps are a few rows, and this runs in every step's ops.
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t row = cache_rows[b];
    SHARDLM_CHECK(row >= 0 && row < slots, op, ": step row ", b, " names cache row ", row, ", outside the cache's ",
                  slots, " rows");
    for (int64_t earlier = 0; earlier < b; ++earlier)
      SHARDLM_CHECK(cache_rows[earlier] != row, op, ": cache row ", row, " is named by two rows of one step");
  }
}

}  // namespace shardlm::backends
