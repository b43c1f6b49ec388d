#pragma once
// The CUDA backend: weights, KV cache and activations in device memory, ops as kernels on
// one stream (kernels.h) and cuBLASLt, compiled executables replayed as CUDA graphs.
// Built only where CMake finds a CUDA toolkit (SHARDLM_HAVE_CUDA).

#include <memory>

#include "backends/backend.h"

namespace shardlm::backends::cuda {

// What the driver reports: available, device count and names, or why none can be used.
BackendInfo device_info();
// device_index: N of "cuda:N" (an index among the devices CUDA_VISIBLE_DEVICES shows).
std::unique_ptr<Backend> create_backend(int device_index);
// The cudaStream_t `backend`'s ops run on (for collectives that must join it); null when
// `backend` is not a CUDA backend.
void* stream_of(Backend& backend);

}  // namespace shardlm::backends::cuda
