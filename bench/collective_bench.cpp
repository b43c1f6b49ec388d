// The cost of one collective of a decode step through parallel::ProcessGroup, alone (no
// model, no waiting for a slower rank): an all-reduce of a hidden state and an all-gather
// of logit columns, at the sizes of Qwen3-0.6B's decode. Prints one JSON object (rank 0).
//   shardlm launch --nproc-per-node 2 -- build/bench/collective_bench [hidden] [vocab]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "parallel/process_group.h"

using namespace shardlm;

namespace {

template <typename Collective>
double microseconds_each(parallel::ProcessGroup& group, Collective collective) {
  constexpr int warm_up = 100, repetitions = 2000;
  for (int i = 0; i < warm_up; ++i) collective();
  group.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repetitions; ++i) collective();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / repetitions;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t hidden = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int64_t vocab = argc > 2 ? std::atoll(argv[2]) : 151936;
  std::shared_ptr<parallel::ProcessGroup> group = parallel::world_process_group();
  const int ranks = group->size();
  Tensor state = Tensor::zeros({1, hidden}, DType::f32);  // [rows, hidden]
  std::vector<int64_t> counts(static_cast<size_t>(ranks), vocab / ranks);
  counts.back() += vocab % ranks;
  Tensor local = Tensor::zeros({1, counts[static_cast<size_t>(group->rank())]}, DType::f32);  // [rows, vocab / ranks]
  Tensor logits = Tensor::zeros({1, vocab}, DType::f32);  // [rows, vocab]
  const double reduce_us = microseconds_each(*group, [&] { group->all_reduce_sum(state); });
  const double gather_us = microseconds_each(*group, [&] { group->all_gather_columns(local, logits, counts); });
  if (group->rank() == 0)
    std::printf("{\"ranks\": %d, \"hidden\": %lld, \"vocab\": %lld, \"all_reduce_us\": %.1f, \"all_gather_us\": %.1f}\n",
                ranks, static_cast<long long>(hidden), static_cast<long long>(vocab), reduce_us, gather_us);
}
