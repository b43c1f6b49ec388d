#pragma once
// A ProcessGroup over NCCL, for ranks that each drive one GPU through the CUDA backend.
// Built with the CUDA backend (SHARDLM_HAVE_CUDA).

#include <memory>

#include "backends/backend.h"
#include "parallel/process_group.h"

namespace shardlm::parallel {

// Collectives on device tensors, enqueued on `cuda_backend`'s stream so that they order
// with its kernels and a captured CUDA graph replays them. `bootstrap` (the MPI world)
// carries NCCL's unique id from rank 0 and keeps the host-side duties: first_failure,
// barrier, abort, and broadcasts of host tensors.
std::shared_ptr<ProcessGroup> nccl_process_group(std::shared_ptr<ProcessGroup> bootstrap,
                                                 backends::Backend& cuda_backend);

}  // namespace shardlm::parallel
