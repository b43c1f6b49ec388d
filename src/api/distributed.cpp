// Joining a tensor-parallel job: the process group, the user's plan, agreed failures.
#include <algorithm>
#include <thread>

#include "api/impl.h"
#include "core/logging.h"
#ifdef SHARDLM_HAVE_CUDA
#include "parallel/nccl_process_group.h"
#endif

namespace shardlm::api {

parallel::TensorParallel join_tensor_parallel(const std::optional<DistributedConfig>& config) {
  parallel::TensorParallel tensor_parallel;
  const int tp_size = config ? config->tp_size : 1;
  if (tp_size < 1) fail("tp_size ", tp_size, " is not a process count: use 1 or more");
  std::shared_ptr<parallel::ProcessGroup> world =
      tp_size > 1 || parallel::launched_by_mpi() ? parallel::world_process_group() : nullptr;
  if (tp_size == 1) {
    if (world && world->size() > 1 && world->rank() == 0)
      log::warning(str_cat("this job has ", world->size(),
                           " processes but tp_size is 1: each process loads and runs the whole model"));
    return tensor_parallel;
  }
  if (world->size() != tp_size)
    throw JobError(str_cat("tp_size is ", tp_size, " but this job has ", world->size(), " process",
                           world->size() == 1 ? "" : "es",
                           ": start one process per rank, e.g. `shardlm launch --nproc-per-node ", tp_size,
                           " -- shardlm generate --tp-size ", tp_size, " ...` or `mpirun -np ", tp_size, " ...`"));
  // Ranks other than 0 keep quiet unless asked for verbose logs (each then reports its load).
  if (world->rank() != 0 && log::level() == log::Level::notice) log::set_level(log::Level::warning);
  tensor_parallel.group = world;
  if (config) {
    if (!(config->collective_timeout_seconds >= 0))
      throw JobError(str_cat("collective_timeout_seconds is ", config->collective_timeout_seconds,
                             ": use a number of seconds, or 0 to wait forever"));
    world->set_collective_timeout(config->collective_timeout_seconds);
  }
  // Every rank checks the same plan text, so a bad style fails on all of them alike.
  if (config) {
    try {
      tensor_parallel.plan = parallel::TpPlan(config->tp_plan, "tp_plan");
    } catch (const Error& error) {
      throw JobError(error.what());
    }
  }
  return tensor_parallel;
}

std::string rank_device(const std::string& device_map, const parallel::ProcessGroup* group) {
  if (!group || device_map != "cuda") return device_map;
  // `shardlm launch` leaves each process one visible GPU (CUDA_VISIBLE_DEVICES); under a
  // plain mpirun every process sees them all and takes the one of its local rank.
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.name == "cuda" && info.device_count == 1) return "cuda:0";
  return str_cat("cuda:", group->local_rank());
}

std::shared_ptr<parallel::ProcessGroup> device_process_group(std::shared_ptr<parallel::ProcessGroup> group,
                                                             backends::Backend& backend) {
  if (backend.device().kind == DeviceKind::cpu || group->size() == 1) return group;
#ifdef SHARDLM_HAVE_CUDA
  return parallel::nccl_process_group(std::move(group), backend);
#else
  fail("tensor parallelism on ", backend.name(), " needs NCCL, which this build lacks");
#endif
}

int default_threads(int requested, int ranks_on_this_host) {
  if (requested > 0) return requested;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, hardware / std::max(1, ranks_on_this_host));
}

void on_every_rank(parallel::ProcessGroup* group, const std::function<void()>& work) {
  if (!group || group->size() == 1) return work();
  std::optional<std::string> failure;
  try {
    work();
  } catch (const Error& error) {
    failure = error.what();
  } catch (const std::exception& error) {
    failure = str_cat("internal error: ", error.what());
  }
  if (std::optional<std::string> first = group->first_failure(failure)) throw JobError(*first);
}

}  // namespace shardlm::api
