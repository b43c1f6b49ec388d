#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "cli/commands.h"

namespace shardlm::cli {

void add_devices_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("devices", "List the backends of this build, whether each can run here, "
                                                    "and how many devices it sees");
  auto plugin = std::make_shared<std::string>();
  command->add_option("--pjrt-plugin", *plugin,
                      "The PJRT plugin to list as pjrt (default: $SHARDLM_PJRT_PLUGIN, else the XLA:CPU plugin "
                      "that scripts/fetch_pjrt_plugin.sh installed)");
  command->callback([plugin] {
    const std::vector<backends::BackendInfo> backends = backends::list_backends(*plugin);
    std::printf("%-6s %-10s %-8s %s\n", "name", "available", "devices", "detail");
    for (const backends::BackendInfo& info : backends)
      std::printf("%-6s %-10s %-8d %s\n", info.name.c_str(), info.available ? "yes" : "no", info.device_count,
                  info.detail.c_str());
    // Which GPUs this process may see (`shardlm launch` gives each rank its own).
    if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) std::printf("CUDA_VISIBLE_DEVICES=%s\n", visible);
  });
}

}  // namespace shardlm::cli
