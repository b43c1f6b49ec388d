#pragma once
// Minimal leveled logging to stderr. Generated text goes to stdout; everything else here.

#include <string>

namespace shardlm::log {

// notice: something the user asked to be told (e.g. which device "auto" picked); shown by default.
enum class Level { debug, info, notice, warning, error, quiet };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);

inline void debug(const std::string& message) { write(Level::debug, message); }
inline void info(const std::string& message) { write(Level::info, message); }
inline void notice(const std::string& message) { write(Level::notice, message); }
inline void warning(const std::string& message) { write(Level::warning, message); }

}  // namespace shardlm::log
