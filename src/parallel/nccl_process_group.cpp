#include "parallel/nccl_process_group.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "core/error.h"

namespace shardlm::parallel {
namespace {

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) fail("NCCL error in ", what, ": ", ncclGetErrorString(status));
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("CUDA error in ", what, ": ", cudaGetErrorString(status));
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<ProcessGroup> bootstrap, cudaStream_t stream, Device device)
      : bootstrap_(std::move(bootstrap)), stream_(stream), device_(device) {
    ncclUniqueId id{};
    Tensor id_bytes = Tensor::zeros({static_cast<int64_t>(sizeof(id))}, DType::u8);
    if (bootstrap_->rank() == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(id_bytes.mutable_raw(), &id, sizeof(id));
    }
    bootstrap_->broadcast(id_bytes, 0);
    std::memcpy(&id, id_bytes.raw(), sizeof(id));
    check_nccl(ncclCommInitRank(&communicator_, bootstrap_->size(), id, bootstrap_->rank()), "ncclCommInitRank");
  }
  ~NcclProcessGroup() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(communicator_);
  }

  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  int local_rank() const override { return bootstrap_->local_rank(); }
  int local_size() const override { return bootstrap_->local_size(); }
  std::string backend_name() const override { return "nccl"; }
  std::string host_of(int rank) const override { return bootstrap_->host_of(rank); }
  // NCCL's collectives are only enqueued here: the timeout covers the host broadcasts,
  // which go through the bootstrap group.
  void set_collective_timeout(double seconds) override {
    bootstrap_->set_collective_timeout(seconds);
  }

  // Enqueued only: the time is part of the step on the GPU, not counted here.
  void all_reduce_sum(const Tensor& tensor) override {
    check_on_device(tensor, "all_reduce_sum");
    SHARDLM_CHECK(tensor.dtype() == DType::f32, "all_reduce_sum: expected float32, got ", tensor.describe());
    ++collective_count_;
    check_nccl(ncclAllReduce(tensor.raw(), tensor.mutable_raw(), static_cast<size_t>(tensor.numel()), ncclFloat, ncclSum,
                             communicator_, stream_),
               "ncclAllReduce");
  }

  // Ranks' column counts may differ (NCCL's all-gather wants equal parts): each rank
  // broadcasts its block [rows, counts[r]] into staging, then the blocks are laid side by side.
  void all_gather_columns(const Tensor& local, const Tensor& out, const std::vector<int64_t>& counts) override {
    check_on_device(local, "all_gather_columns");
    check_on_device(out, "all_gather_columns");
    SHARDLM_CHECK(static_cast<int>(counts.size()) == size(), "all_gather_columns: ", counts.size(),
                  " column counts for a group of ", size());
    const int64_t rows = local.shape()[0];
    int64_t total = 0;
    for (int64_t count : counts) total += count;
    SHARDLM_CHECK(local.shape()[1] == counts[rank()] && out.shape()[0] == rows && out.shape()[1] == total,
                  "all_gather_columns: local ", local.describe(), " and out ", out.describe(), " do not fit");
    ++collective_count_;
    float* staging = staging_floats(rows * total);  // [ranks][rows, counts[r]]
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    int64_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      check_nccl(ncclBroadcast(local.raw(), staging + offset, static_cast<size_t>(rows * counts[r]), ncclFloat, r,
                               communicator_, stream_),
                 "ncclBroadcast");
      offset += rows * counts[r];
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    offset = 0;
    int64_t first_column = 0;
    for (int r = 0; r < size(); ++r) {
      if (counts[r] > 0 && rows > 0)
        check_cuda(cudaMemcpy2DAsync(out.mutable_data<float>() + first_column, static_cast<size_t>(total) * sizeof(float),
                                     staging + offset, static_cast<size_t>(counts[r]) * sizeof(float),
                                     static_cast<size_t>(counts[r]) * sizeof(float), static_cast<size_t>(rows),
                                     cudaMemcpyDeviceToDevice, stream_),
                   "all_gather_columns");
      offset += rows * counts[r];
      first_column += counts[r];
    }
  }

  void broadcast(const Tensor& tensor, int root) override {
    if (tensor.device().kind == DeviceKind::cpu) return bootstrap_->broadcast(tensor, root);
    check_on_device(tensor, "broadcast");
    check_nccl(ncclBroadcast(tensor.raw(), tensor.mutable_raw(), tensor.nbytes(), ncclUint8, root, communicator_, stream_),
               "ncclBroadcast");
    check_cuda(cudaStreamSynchronize(stream_), "broadcast");
  }
  void broadcast_waiting(const Tensor& tensor, int root) override {
    if (tensor.device().kind == DeviceKind::cpu) return bootstrap_->broadcast_waiting(tensor, root);
    broadcast(tensor, root);
  }
  void barrier() override {
    check_cuda(cudaStreamSynchronize(stream_), "barrier");
    bootstrap_->barrier();
  }
  std::optional<std::string> first_failure(const std::optional<std::string>& failure) override {
    return bootstrap_->first_failure(failure);
  }
  [[noreturn]] void abort(const std::string& message) override {
    bootstrap_->abort(message);
    std::abort();  // not reached: the bootstrap group's abort ends the process
  }

 private:
  void check_on_device(const Tensor& tensor, const char* op) const {
    SHARDLM_CHECK(tensor.device() == device_, op, " over NCCL: ", tensor.describe(), " is on ",
                  tensor.device().to_string(), ", not on this rank's GPU ", device_.to_string());
  }

  // Grow-only; a grown buffer keeps the old one alive, as captured CUDA graphs may use it.
  float* staging_floats(int64_t count) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    if (bytes > staging_bytes_) {
      void* pointer = nullptr;
      check_cuda(cudaMalloc(&pointer, bytes), "all_gather_columns staging");
      staging_.emplace_back(pointer, [](void* p) { cudaFree(p); });
      staging_bytes_ = bytes;
    }
    return static_cast<float*>(staging_.empty() ? nullptr : staging_.back().get());
  }

  std::shared_ptr<ProcessGroup> bootstrap_;
  cudaStream_t stream_;
  Device device_;
  ncclComm_t communicator_ = nullptr;
  std::vector<std::shared_ptr<void>> staging_;
  size_t staging_bytes_ = 0;
};

}  // namespace

std::shared_ptr<ProcessGroup> nccl_process_group(std::shared_ptr<ProcessGroup> bootstrap,
                                                 backends::Backend& cuda_backend) {
  void* stream = backends::cuda::stream_of(cuda_backend);
  SHARDLM_CHECK(stream != nullptr, "an NCCL process group needs the CUDA backend, not ", cuda_backend.name());
  return std::make_shared<NcclProcessGroup>(std::move(bootstrap), static_cast<cudaStream_t>(stream),
                                            cuda_backend.device());
}

}  // namespace shardlm::parallel
