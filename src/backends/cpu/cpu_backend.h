#pragma once
#include <memory>

#include "backends/backend.h"

namespace shardlm::backends {

std::unique_ptr<Backend> create_cpu_backend();

}  // namespace shardlm::backends
