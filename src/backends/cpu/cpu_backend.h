#pragma once
#include <memory>

#include "backends/backend.h"

namespace shardlm::backends {

// threads <= 0: one per hardware thread.
std::unique_ptr<Backend> create_cpu_backend(int threads = 0);

}  // namespace shardlm::backends
