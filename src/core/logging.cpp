#include "core/logging.h"

#include <atomic>
#include <cstdio>

namespace shardlm::log {
namespace {
std::atomic<Level> current_level{Level::notice};
}

void set_level(Level level) { current_level = level; }
Level level() { return current_level; }

void write(Level message_level, const std::string& message) {
  if (message_level < current_level.load()) return;
  static const char* const prefixes[] = {"debug", "info", "notice", "warning", "error"};
  std::fprintf(stderr, "[shardlm %s] %s\n", prefixes[static_cast<int>(message_level)], message.c_str());
}

}  // namespace shardlm::log
