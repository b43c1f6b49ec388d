#include "parallel/process_group.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "parallel/collective_watchdog.h"

namespace shardlm::parallel {
namespace {

class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend_name() const override { return "single"; }
  void all_reduce_sum(const Tensor&) override {}
  void all_gather_columns(const Tensor& local, const Tensor& out, const std::vector<int64_t>&) override {
    if (local.raw() != out.raw()) std::memcpy(out.mutable_raw(), local.raw(), local.nbytes());
  }
  void broadcast(const Tensor&, int) override {}
  void barrier() override {}
  std::optional<std::string> first_failure(const std::optional<std::string>& failure) override {
    return failure ? std::optional<std::string>(describe_rank(0) + ": " + *failure) : std::nullopt;
  }
  [[noreturn]] void abort(const std::string& message) override {
    std::cerr << "error: " << message << "\n";
    std::exit(1);
  }
};

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  fail("MPI: ", call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

// Open MPI between processes. Only the thread that loaded the model calls it.
class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Serialized: a server's engine thread makes the collectives its main thread began.
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      std::atexit(finalize_mpi);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as status codes and are thrown as exceptions naming the call.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    local_rank_ = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", rank_));
    local_size_ = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", size_));
    gather_host_names();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string backend_name() const override { return "mpi"; }
  std::string host_of(int rank) const override { return hosts_.at(static_cast<size_t>(rank)); }
  void set_collective_timeout(double seconds) override { watchdog_.set_timeout(seconds); }

  void all_reduce_sum(const Tensor& tensor) override {
    SHARDLM_CHECK(tensor.dtype() == DType::f32, "all_reduce_sum: expected float32, got ", tensor.describe());
    Timer timer(*this);
    CollectiveWatchdog::Watch watch(watchdog_, "MPI_Allreduce");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, tensor.mutable_raw(), static_cast<int>(tensor.numel()), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
  }

  void all_gather_columns(const Tensor& local, const Tensor& out, const std::vector<int64_t>& counts) override {
    SHARDLM_CHECK(static_cast<int>(counts.size()) == size_, "all_gather_columns: ", counts.size(),
                  " column counts for a group of ", size_);
    const int64_t rows = local.shape()[0];
    int64_t total = 0;
    for (int64_t count : counts) total += count;
    SHARDLM_CHECK(local.shape()[1] == counts[rank_] && out.shape()[0] == rows && out.shape()[1] == total,
                  "all_gather_columns: local ", local.describe(), " and out ", out.describe(), " do not fit");
    Timer timer(*this);
    CollectiveWatchdog::Watch watch(watchdog_, "MPI_Allgatherv");
    std::vector<int>& elements = gather_elements_;
    std::vector<int>& displacements = gather_displacements_;
    elements.resize(counts.size());
    displacements.resize(counts.size());
    int offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      elements[r] = static_cast<int>(rows * counts[r]);
      displacements[r] = offset;
      offset += elements[r];
    }
    staging_.resize(static_cast<size_t>(offset));  // [ranks][rows, counts[r]]
    check_mpi(MPI_Allgatherv(local.raw(), elements[rank_], MPI_FLOAT, staging_.data(), elements.data(),
                             displacements.data(), MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgatherv");
    float* result = out.mutable_data<float>();
    int64_t first_column = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      const float* block = staging_.data() + displacements[r];
      for (int64_t row = 0; row < rows; ++row)
        std::memcpy(result + row * total + first_column, block + row * counts[r], counts[r] * sizeof(float));
      first_column += counts[r];
    }
  }

  void broadcast(const Tensor& tensor, int root) override {
    CollectiveWatchdog::Watch watch(watchdog_, "MPI_Bcast");
    check_mpi(MPI_Bcast(tensor.mutable_raw(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, MPI_COMM_WORLD),
              "MPI_Bcast");
  }

  void broadcast_waiting(const Tensor& tensor, int root) override {
    MPI_Request request;
    check_mpi(MPI_Ibcast(tensor.mutable_raw(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, MPI_COMM_WORLD,
                         &request),
              "MPI_Ibcast");
    // Root's next step usually follows within a millisecond: spin that long, then back off
    // to sleeps of at most a millisecond (the most a request's first step waits for us).
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(20);
    for (int done = 0;;) {
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) continue;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  std::optional<std::string> first_failure(const std::optional<std::string>& failure) override {
    const int mine = failure ? rank_ : size_;
    int first = size_;
    check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (first == size_) return std::nullopt;
    std::string message = rank_ == first ? *failure : std::string();
    int length = static_cast<int>(message.size());
    check_mpi(MPI_Bcast(&length, 1, MPI_INT, first, MPI_COMM_WORLD), "MPI_Bcast");
    message.resize(static_cast<size_t>(length));
    check_mpi(MPI_Bcast(message.data(), length, MPI_CHAR, first, MPI_COMM_WORLD), "MPI_Bcast");
    return str_cat(describe_rank(first), ": ", message);
  }

  [[noreturn]] void abort(const std::string& message) override {
    std::cerr << "shardlm: error on " << describe_rank(rank_) << " of " << size_ << ": " << message << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);
  }

 private:
  struct Timer {
    explicit Timer(MpiProcessGroup& group) : group(group), start(std::chrono::steady_clock::now()) {}
    ~Timer() {
      group.communication_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++group.collective_count_;
    }
    MpiProcessGroup& group;
    std::chrono::steady_clock::time_point start;
  };

  // Every rank learns every rank's host name once, so that any rank's message can name
  // the host of another.
  void gather_host_names() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
    std::vector<char> all(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
    check_mpi(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD),
              "MPI_Allgather");
    for (int r = 0; r < size_; ++r) {
      const char* host = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      hosts_.emplace_back(host, strnlen(host, MPI_MAX_PROCESSOR_NAME));
    }
  }

  std::string describe_timeout(const char* collective, double waited_s) const {
    std::string others;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) others += str_cat(others.empty() ? "" : ", ", describe_rank(r));
    return str_cat(describe_rank(rank_), " of ", size_, ": ", collective, " has waited ", static_cast<int>(waited_s),
                   " s for ", others,
                   ": one of them has stopped or is stuck, or the network to its host is down. The job ends; "
                   "--collective-timeout sets this limit (docs/TENSOR_PARALLEL.md)");
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<std::string> hosts_;
  CollectiveWatchdog watchdog_{[this](const char* collective, double waited_s) {
    return describe_timeout(collective, waited_s);
  }};
  std::vector<float> staging_;
  std::vector<int> gather_elements_, gather_displacements_;
};

}  // namespace

std::string ProcessGroup::describe_rank(int rank) const {
  const std::string host = host_of(rank);
  return host.empty() ? str_cat("rank ", rank) : str_cat("rank ", rank, " (", host, ")");
}

std::shared_ptr<ProcessGroup> single_process_group() { return std::make_shared<SingleProcessGroup>(); }

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

std::shared_ptr<ProcessGroup> world_process_group() {
  static std::once_flag once;
  static std::shared_ptr<ProcessGroup> world;
  std::call_once(once, [] {
    if (launched_by_mpi())
      world = std::make_shared<MpiProcessGroup>();
    else
      world = single_process_group();
  });
  return world;
}

void abort_job_if_distributed(const std::string& message) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) world_process_group()->abort(message);
}

}  // namespace shardlm::parallel
