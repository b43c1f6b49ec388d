#pragma once
// Faults injected on purpose, to test what a tensor-parallel job does when one rank
// fails mid-generation (tests/parallel/test_multi_host.sh). Set in the environment:
//   SHARDLM_INJECT_FAULT=RANK:STEP:error       rank RANK raises an error at engine step STEP
//   SHARDLM_INJECT_FAULT=RANK:STEP:delay=SECS  rank RANK stalls SECS seconds there (a slow
//                                              or stopped host), then goes on
// Unset, it costs one branch a step.

#include <cstdint>

#include "parallel/process_group.h"

namespace shardlm::parallel {

// Called by every rank at the start of each engine step (0, 1, ...).
void inject_fault_if_asked(const ProcessGroup& group, int64_t step);

}  // namespace shardlm::parallel
