#pragma once
// parallel::ProcessGroup: the collectives tensor parallelism needs, in place on the
// tensors of the ranks' devices. One process per device; rank r of a group of `size`
// holds shard r. Implementations: a single process (every collective a no-op), Open MPI
// between CPU processes (host tensors), NCCL between GPUs (nccl_process_group.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace shardlm::parallel {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank among the processes on this host (which device it drives), and their count.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual std::string backend_name() const = 0;
  // The host name rank `rank` runs on ("" for a group of one), for messages that must
  // say where a failure happened.
  virtual std::string host_of(int /*rank*/) const { return ""; }
  // "rank 1 (node-b)", or "rank 1" where hosts are unknown.
  std::string describe_rank(int rank) const;
  // A collective of a forward pass (all_reduce_sum, all_gather_columns, broadcast) that
  // waits longer than this ends the process with a message naming rank, host and
  // collective (a lost host or link is otherwise silent over TCP). 0: wait forever.
  virtual void set_collective_timeout(double /*seconds*/) {}

  // tensor f32, any shape: every rank ends with the element-wise sum over ranks.
  virtual void all_reduce_sum(const Tensor& tensor) = 0;
  // local f32 [rows, counts[rank]] -> out f32 [rows, sum(counts)]: rank r's columns
  // land at columns [counts[0] + ... + counts[r-1], ... + counts[r]).
  virtual void all_gather_columns(const Tensor& local, const Tensor& out, const std::vector<int64_t>& counts) = 0;
  // Every rank ends with root's bytes of `tensor`.
  virtual void broadcast(const Tensor& tensor, int root) = 0;
  // The same for a host tensor, on a rank that may wait long for root (a server's rank
  // between requests): after a short spin it sleeps between polls, so an idle rank does
  // not hold a core as MPI's own wait does. No timeout: an idle server waits for ever. Every rank must call this form for the same
  // broadcast: MPI does not match a nonblocking collective with a blocking one.
  virtual void broadcast_waiting(const Tensor& tensor, int root) { broadcast(tensor, root); }
  virtual void barrier() = 0;
  // Collective: every rank passes its own failure (or nullopt) and gets back the first
  // failing rank's message prefixed by "rank N (host): ", or nullopt when all succeeded. An
  // error in one process becomes the same error in all of them, never a hang.
  virtual std::optional<std::string> first_failure(const std::optional<std::string>& failure) = 0;
  // Ends every process of the group at once with a non-zero status.
  [[noreturn]] virtual void abort(const std::string& message) = 0;

  // Seconds spent inside all_reduce_sum and all_gather_columns since the last reset.
  double communication_seconds() const { return communication_seconds_; }
  int64_t collective_count() const { return collective_count_; }
  void reset_communication_stats() { communication_seconds_ = 0, collective_count_ = 0; }

 protected:
  double communication_seconds_ = 0;
  int64_t collective_count_ = 0;
};

// A group of one: the default for tp_size 1.
std::shared_ptr<ProcessGroup> single_process_group();

// The process group of every process of this job (MPI_COMM_WORLD), initializing MPI on
// first use; one per process. A process not started by mpirun is a world of one.
std::shared_ptr<ProcessGroup> world_process_group();

// True when this process was started by mpirun (Open MPI's or PMIx's environment).
bool launched_by_mpi();

// Aborts the whole job when MPI is running with more than one process; returns otherwise.
// For top-level error handlers: one rank's fatal error must end every rank.
void abort_job_if_distributed(const std::string& message);

}  // namespace shardlm::parallel
