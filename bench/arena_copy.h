#pragma once
// For the benchmarks: weights placed as the loader places them (models/weights.cpp).
#include <cstring>

#include "core/tensor.h"

namespace shardlm {

// `tensor` (and its block scales) copied into huge-page memory: a tensor of its own under
// 2 MB lies in 4 KB pages, and each of them would cost a TLB miss.
inline Tensor in_arena(HostArena& arena, const Tensor& tensor) {
  const auto place = [&](const Tensor& part) {
    Tensor placed = arena.empty(part.shape(), part.dtype());
    std::memcpy(placed.mutable_raw(), part.raw(), part.nbytes());
    return placed;
  };
  return tensor.quantized() ? place(tensor).with_block_scales(place(tensor.block_scales())) : place(tensor);
}

}  // namespace shardlm
