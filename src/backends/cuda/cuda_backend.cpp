// The CUDA backend. Tensors it allocates are device memory (Device{cuda, N}); ops check
// that their operands live there, then enqueue kernels (kernels.h) or cuBLASLt matmuls on
// the backend's stream. Nothing synchronizes except copies to the host. Few activation
// rows (decode) take the fused GEMV kernels; many (prefill) take cuBLASLt with the
// activations rounded to the weights' 16-bit type, as a bf16 model runs in transformers.
#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "backends/cuda/cublaslt_library.h"
#include "backends/cuda/kernels.h"
#include "core/error.h"
#include "core/logging.h"

namespace shardlm::backends::cuda {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("CUDA error in ", what, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}

const char* status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    default: return "an unlisted cuBLAS status";
  }
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt error in ", what, ": ", status_name(status));
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: fail("cuda: no matmul for ", dtype_name(dtype), " weights: use float32, bfloat16 or float16");
  }
}

// Device memory freed when its last Tensor goes.
std::shared_ptr<void> device_memory(size_t bytes) {
  void* pointer = nullptr;
  if (bytes) {
    const cudaError_t status = cudaMalloc(&pointer, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // the failure is reported here; later ops must not see it again
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      fail("cannot allocate ", bytes, " bytes on the GPU (", free_bytes, " of ", total_bytes,
           " free): ", cudaGetErrorString(status), "; use a smaller max_cache_len or batch, or tensor parallelism");
    }
  }
  return std::shared_ptr<void>(pointer, [](void* p) {
    if (p) cudaFree(p);
  });
}

class CudaGraphReplay final : public Replay {
 public:
  ~CudaGraphReplay() override {
    if (executable) cudaGraphExecDestroy(executable);
  }
  int runs = 0;
  cudaGraphExec_t executable = nullptr;
};

// A matmul's shape and types: the key of its cached cuBLASLt descriptors and algorithm.
using MatmulKey = std::tuple<int64_t, int64_t, int64_t, DType>;  // out_features, rows, in, weight dtype

struct MatmulPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t weight = nullptr, input = nullptr, output = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index) : device_index_(device_index) {
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    SHARDLM_CHECK(device_index >= 0 && device_index < count, "device_map 'cuda:", device_index, "': this machine shows ",
                  count, " CUDA device(s) (cuda:0 to cuda:", count - 1, "); CUDA_VISIBLE_DEVICES narrows which");
    check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cublas(cublaslt().create(&blas_), "cublasLtCreate");
    workspace_ = device_memory(workspace_bytes);
    const char* graphs = std::getenv("SHARDLM_CUDA_GRAPHS");
    graphs_enabled_ = !(graphs && std::string(graphs) == "0");
  }

  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    for (auto& [key, plan] : plans_) {
      cublaslt().desc_destroy(plan.operation);
      cublaslt().layout_destroy(plan.weight);
      cublaslt().layout_destroy(plan.input);
      cublaslt().layout_destroy(plan.output);
    }
    cublaslt().destroy(blas_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return str_cat("cuda:", device_index_); }
  Device device() const override { return {DeviceKind::cuda, device_index_}; }
  cudaStream_t stream() const { return stream_; }

  Tensor allocate(Shape shape, DType dtype) override {
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    std::shared_ptr<void> memory = device_memory(bytes);
    return Tensor::wrap(memory, memory.get(), std::move(shape), dtype, /*writable=*/true, device());
  }

  Tensor to_device(const Tensor& host) override {
    if (host.device() == device()) return host;
    on_host(host, "to_device");
    SHARDLM_CHECK(!host.quantized(), "int8 weights (", host.describe(),
                  ") have no CUDA kernels yet: load the model without --quantize int8, or in bfloat16");
    Tensor result = allocate(host.shape(), host.dtype());
    check_cuda(cudaMemcpyAsync(result.mutable_raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_),
               "copy to the device");
    check_cuda(cudaStreamSynchronize(stream_), "copy to the device");
    return result;
  }

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out) override {
    launch_embedding(on_device(table, "embedding"), table.dtype(), table.shape()[0], table.shape()[1],
                     ids_on_device(ids, "embedding"), ids.numel(), first_row, out_on_device(out, "embedding"),
                     stream_);
    check_launch("embedding");
  }

  void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) override {
    matmul("linear", {.x = &x, .weight = &weight, .bias = &bias, .out = &out});
  }
  void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                       const Tensor& out) override {
    matmul("linear_residual", {.x = &x, .weight = &weight, .bias = &bias, .residual = &residual, .out = &out});
  }
  void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                    const Tensor& up_bias, const Tensor& out) override {
    matmul("gated_linear",
           {.x = &x, .weight = &gate_weight, .bias = &gate_bias, .up_weight = &up_weight, .up_bias = &up_bias, .out = &out});
  }
  void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                       const Tensor& out) override {
    matmul("rms_norm_linear",
           {.x = &x, .weight = &weight, .bias = &bias, .norm_weight = &norm_weight, .eps = eps, .out = &out});
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    const int64_t dim = x.shape()[x.shape().rank() - 1];
    launch_rms_norm(f32_on_device(x, "rms_norm"), on_device(weight, "rms_norm"), weight.dtype(), eps, x.numel() / dim,
                    dim, out_on_device(out, "rms_norm"), DType::f32, stream_);
    check_launch("rms_norm");
  }

  void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) override {
    RopeParameters parameters{};
    SHARDLM_CHECK(rotary.rotary_dim / 2 <= max_rotary_pairs && static_cast<int64_t>(rotary.inv_freq.size()) >= rotary.rotary_dim / 2,
                  "rope: rotary_dim ", rotary.rotary_dim, " exceeds the CUDA kernel's ", 2 * max_rotary_pairs);
    parameters.rotary_pairs = static_cast<int>(rotary.rotary_dim / 2);
    parameters.interleaved = rotary.interleaved;
    for (int i = 0; i < parameters.rotary_pairs; ++i) parameters.inv_freq[i] = rotary.inv_freq[i];
    launch_rope(out_on_device(x, "rope"), ids_on_device(positions, "rope"), x.shape()[0], x.shape()[1], x.shape()[2],
                parameters, stream_);
    check_launch("rope");
  }

  void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions,
                      const Tensor& cache_rows) override {
    const Shape& shape = entries.shape();  // [batch, seq, kv_heads, head_dim]
    launch_kv_cache_write(writable_on_device(cache, "kv_cache_write"), cache.dtype(),
                          f32_on_device(entries, "kv_cache_write"), ids_on_device(positions, "kv_cache_write"),
                          ids_on_device(cache_rows, "kv_cache_write"), cache.shape()[0], shape[0], shape[1], shape[2],
                          shape[3], cache.shape()[2], stream_);
    check_launch("kv_cache_write");
  }

  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                 const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out) override {
    SHARDLM_CHECK((k_cache.dtype() == DType::f32 || k_cache.dtype() == DType::bf16) && v_cache.dtype() == k_cache.dtype(),
                  "attention on cuda: the KV cache must be float32 or bfloat16 (keys and values alike), not ",
                  k_cache.describe(), " and ", v_cache.describe());
    SHARDLM_CHECK(q.shape()[3] <= 256, "attention on cuda: head_dim ", q.shape()[3], " is above the kernel's 256");
    AttentionArguments arguments{.q = f32_on_device(q, "attention"),
                                 .k_cache = on_device(k_cache, "attention"),
                                 .v_cache = on_device(v_cache, "attention"),
                                 .cache_dtype = k_cache.dtype(),
                                 .positions = ids_on_device(positions, "attention"),
                                 .cache_rows = ids_on_device(cache_rows, "attention"),
                                 .batch = q.shape()[0],
                                 .seq = q.shape()[1],
                                 .heads = q.shape()[2],
                                 .kv_heads = k_cache.shape()[1],
                                 .head_dim = q.shape()[3],
                                 .max_cache_len = k_cache.shape()[2],
                                 .scale = scale,
                                 .sliding_window = sliding_window,
                                 .out = out_on_device(out, "attention")};
    float* partial = static_cast<float*>(scratch(static_cast<size_t>(attention_scratch_floats(arguments)) * sizeof(float)));
    launch_attention(arguments, partial, stream_);
    check_launch("attention");
  }

  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    launch_silu_mul(f32_on_device(gate, "silu_mul"), f32_on_device(up, "silu_mul"), out_on_device(out, "silu_mul"),
                    out.numel(), stream_);
    check_launch("silu_mul");
  }
  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    launch_gelu_tanh_mul(f32_on_device(gate, "gelu_tanh_mul"), f32_on_device(up, "gelu_tanh_mul"),
                         out_on_device(out, "gelu_tanh_mul"), out.numel(), stream_);
    check_launch("gelu_tanh_mul");
  }
  void scale(const Tensor& x, float factor, const Tensor& out) override {
    launch_scale(f32_on_device(x, "scale"), factor, out_on_device(out, "scale"), out.numel(), stream_);
    check_launch("scale");
  }
  void softcap(const Tensor& x, float cap, const Tensor& out) override {
    launch_softcap(f32_on_device(x, "softcap"), cap, out_on_device(out, "softcap"), out.numel(), stream_);
    check_launch("softcap");
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    launch_add(f32_on_device(a, "add"), f32_on_device(b, "add"), out_on_device(out, "add"), out.numel(), stream_);
    check_launch("add");
  }
  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override {
    const int64_t rows = x.shape()[0], dim = x.numel() / std::max<int64_t>(rows, 1);
    launch_gather_rows(f32_on_device(x, "gather_rows"), dim, ids_on_device(indices, "gather_rows"), indices.numel(),
                       out_on_device(out, "gather_rows"), stream_);
    check_launch("gather_rows");
  }
  void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination, int64_t destination_column,
                    int64_t width) override {
    const int64_t rows = source.shape()[0];
    const size_t source_pitch = static_cast<size_t>(source.shape()[1]) * sizeof(float);
    const size_t destination_pitch = static_cast<size_t>(destination.shape()[1]) * sizeof(float);
    if (rows == 0 || width == 0) return;
    check_cuda(cudaMemcpy2DAsync(out_on_device(destination, "copy_columns") + destination_column, destination_pitch,
                                 f32_on_device(source, "copy_columns") + source_column, source_pitch,
                                 static_cast<size_t>(width) * sizeof(float), static_cast<size_t>(rows),
                                 cudaMemcpyDeviceToDevice, stream_),
               "copy_columns");
  }

  void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices) override {
    const int64_t rows = logits.shape()[0], vocab = logits.shape()[1], k = values.shape()[1];
    SHARDLM_CHECK(k <= cuda::max_top_k, "top_k on cuda: k ", k, " is above ", cuda::max_top_k);
    void* part_scratch = scratch(static_cast<size_t>(top_k_scratch_bytes(rows, vocab, k)));
    launch_top_k(f32_on_device(logits, "top_k"), rows, vocab, k, out_on_device(values, "top_k"),
                 static_cast<int32_t*>(writable_on_device(indices, "top_k")), part_scratch, stream_);
    check_launch("top_k");
  }
  int64_t max_top_k() const override { return cuda::max_top_k; }

  // The first run of an executable goes op by op (scratch grows, matmul plans are chosen);
  // the second is captured into a CUDA graph and launched; later runs launch that graph.
  void run_replayable(std::unique_ptr<Replay>& replay, const std::function<void()>& ops) override {
    if (!graphs_enabled_) return ops();
    if (!replay) replay = std::make_unique<CudaGraphReplay>();
    auto& graph_replay = static_cast<CudaGraphReplay&>(*replay);
    if (graph_replay.executable) {
      check_cuda(cudaGraphLaunch(graph_replay.executable, stream_), "cudaGraphLaunch");
      return;
    }
    if (graph_replay.runs++ == 0) return ops();
    // Relaxed: allocations by other code while capturing are allowed (nothing here makes any).
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      ops();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    const cudaError_t instantiated = cudaGraphInstantiate(&graph_replay.executable, graph, 0);
    cudaGraphDestroy(graph);
    check_cuda(instantiated, "cudaGraphInstantiate");
    check_cuda(cudaGraphLaunch(graph_replay.executable, stream_), "cudaGraphLaunch");
  }

  void copy(const Tensor& source, const Tensor& destination) override {
    check_same_size(source, destination, "copy");
    if (source.raw() == destination.raw() || source.nbytes() == 0) return;
    check_cuda(cudaMemcpyAsync(writable_on_device(destination, "copy"), on_device(source, "copy"), source.nbytes(),
                               cudaMemcpyDeviceToDevice, stream_),
               "copy on the device");
  }
  void copy_to_host(const Tensor& source, const Tensor& destination) override {
    check_same_size(source, destination, "copy_to_host");
    if (source.nbytes() == 0) return;
    check_cuda(cudaMemcpyAsync(on_host(destination, "copy_to_host").mutable_raw(), on_device(source, "copy_to_host"),
                               source.nbytes(),
                               cudaMemcpyDeviceToHost, stream_),
               "copy to the host");
    check_cuda(cudaStreamSynchronize(stream_), "a step on the GPU");
  }
  void copy_from_host(const Tensor& source, const Tensor& destination) override {
    check_same_size(source, destination, "copy_from_host");
    if (source.nbytes() == 0) return;
    // From pageable memory the copy is staged before this returns, so `source` may change after.
    check_cuda(cudaMemcpyAsync(writable_on_device(destination, "copy_from_host"), on_host(source, "copy_from_host").raw(),
                               source.nbytes(),
                               cudaMemcpyHostToDevice, stream_),
               "copy to the device");
  }

 private:
  static constexpr size_t workspace_bytes = size_t{32} << 20;

  struct MatmulOperands {
    const Tensor* x = nullptr;  // f32 [rows, in]
    const Tensor* weight = nullptr;
    const Tensor* bias = nullptr;
    const Tensor* up_weight = nullptr;  // gated_linear
    const Tensor* up_bias = nullptr;
    const Tensor* residual = nullptr;     // linear_residual
    const Tensor* norm_weight = nullptr;  // rms_norm_linear
    float eps = 0;
    const Tensor* out = nullptr;
  };

  void matmul(const char* op, const MatmulOperands& m) {
    const int64_t rows = m.x->shape()[0], in = m.x->shape()[1], out_features = m.weight->shape()[0];
    const DType dtype = m.weight->dtype();
    cuda_type(dtype);  // rejects int8 and other types with a clear message
    on_device(*m.weight, op);
    if (m.up_weight) {
      on_device(*m.up_weight, op);
      SHARDLM_CHECK(m.up_weight->dtype() == dtype && m.up_weight->shape() == m.weight->shape(), op, ": the up weight ",
                    m.up_weight->describe(), " differs from the gate weight ", m.weight->describe());
    }
    const void* bias = defined_on_device(m.bias, op);
    const void* up_bias = defined_on_device(m.up_bias, op);
    if (rows <= max_gemv_rows) {
      GemvArguments arguments{.x = f32_on_device(*m.x, op),
                              .rows = rows,
                              .in = in,
                              .out_features = out_features,
                              .weight_dtype = dtype,
                              .weight = on_device(*m.weight, op),
                              .bias = bias,
                              .bias_dtype = bias ? m.bias->dtype() : DType::f32,
                              .up_weight = m.up_weight ? on_device(*m.up_weight, op) : nullptr,
                              .up_bias = up_bias,
                              .up_bias_dtype = up_bias ? m.up_bias->dtype() : DType::f32,
                              .residual = m.residual ? f32_on_device(*m.residual, op) : nullptr,
                              .norm_weight = m.norm_weight ? on_device(*m.norm_weight, op) : nullptr,
                              .norm_dtype = m.norm_weight ? m.norm_weight->dtype() : DType::f32,
                              .eps = m.eps,
                              .out = out_on_device(*m.out, op)};
      launch_gemv(arguments, stream_);
      check_launch(op);
      return;
    }
    // Many rows: the input once in the weights' type (normalized first when asked), then one
    // cuBLASLt matmul per weight; gate and up land in scratch and meet in silu_mul.
    const size_t element = dtype_size(dtype);
    const size_t input_bytes = align(static_cast<size_t>(rows * in) * element);
    const size_t product_bytes = align(static_cast<size_t>(rows * out_features) * sizeof(float));
    auto* base = static_cast<uint8_t*>(scratch(input_bytes + (m.up_weight ? 2 * product_bytes : 0)));
    const void* input = f32_on_device(*m.x, op);
    if (m.norm_weight) {
      launch_rms_norm(f32_on_device(*m.x, op), on_device(*m.norm_weight, op), m.norm_weight->dtype(), m.eps, rows, in,
                      base, dtype, stream_);
      input = base;
    } else if (dtype != DType::f32) {
      launch_convert(f32_on_device(*m.x, op), rows * in, base, dtype, stream_);
      input = base;
    }
    float* out = out_on_device(*m.out, op);
    if (!m.up_weight) {
      gemm(input, *m.weight, m.residual ? f32_on_device(*m.residual, op) : nullptr, out, rows, in);
      if (bias) launch_add_bias(out, bias, m.bias->dtype(), rows, out_features, stream_);
      check_launch(op);
      return;
    }
    auto* gate = reinterpret_cast<float*>(base + input_bytes);
    auto* up = reinterpret_cast<float*>(base + input_bytes + product_bytes);
    gemm(input, *m.weight, nullptr, gate, rows, in);
    if (bias) launch_add_bias(gate, bias, m.bias->dtype(), rows, out_features, stream_);
    gemm(input, *m.up_weight, nullptr, up, rows, in);
    if (up_bias) launch_add_bias(up, up_bias, m.up_bias->dtype(), rows, out_features, stream_);
    launch_silu_mul(gate, up, out, rows * out_features, stream_);
    check_launch(op);
  }

  // out f32 [rows, out_features] = input [rows, in] (weight's type) x weight^T (+ residual).
  // Column-major view: out^T [out_features, rows] = weight (stored [in, out_features], transposed) x input^T.
  void gemm(const void* input, const Tensor& weight, const float* residual, float* out, int64_t rows, int64_t in) {
    const int64_t out_features = weight.shape()[0];
    MatmulPlan& plan = plan_for({out_features, rows, in, weight.dtype()});
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublaslt().matmul(blas_, plan.operation, &one, weight.raw(), plan.weight, input, plan.input,
                                residual ? &one : &zero, residual ? static_cast<const void*>(residual) : out, plan.output,
                                out, plan.output, &plan.algorithm, workspace_.get(), workspace_bytes, stream_),
                 "cublasLtMatmul");
  }

  MatmulPlan& plan_for(const MatmulKey& key) {
    auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    const auto [out_features, rows, in, dtype] = key;
    MatmulPlan plan;
    const cudaDataType_t type = cuda_type(dtype);
    check_cublas(cublaslt().desc_create(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    check_cublas(cublaslt().desc_set_attribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)),
                 "CUBLASLT_MATMUL_DESC_TRANSA");
    check_cublas(cublaslt().desc_set_attribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)),
                 "CUBLASLT_MATMUL_DESC_TRANSB");
    check_cublas(cublaslt().layout_create(&plan.weight, type, in, out_features, in), "weight layout");
    check_cublas(cublaslt().layout_create(&plan.input, type, in, rows, in), "input layout");
    check_cublas(cublaslt().layout_create(&plan.output, CUDA_R_32F, out_features, rows, out_features), "output layout");
    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(cublaslt().preference_create(&preference), "cublasLtMatmulPreferenceCreate");
    const size_t workspace = workspace_bytes;
    cublaslt().preference_set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                         sizeof(workspace));
    // Operands may be arena views or row slices, aligned to 16 bytes but not to the
    // 256 the heuristic otherwise assumes.
    const uint32_t alignment = 16;
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      cublaslt().preference_set_attribute(preference, attribute, &alignment, sizeof(alignment));
    cublasLtMatmulHeuristicResult_t result{};
    int found_count = 0;
    const cublasStatus_t status = cublaslt().algo_get_heuristic(blas_, plan.operation, plan.weight, plan.input,
                                                                 plan.output, plan.output, preference, 1, &result,
                                                                 &found_count);
    cublaslt().preference_destroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found_count == 0)
      fail("cuBLASLt has no algorithm for a ", dtype_name(dtype), " matmul of [", rows, ", ", in, "] x [", out_features,
           ", ", in, "]^T (", status_name(status), ")");
    plan.algorithm = result.algo;
    return plans_.emplace(key, plan).first->second;
  }

  static size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }

  // A grow-only scratch buffer. A grown buffer never frees the old one while the backend
  // lives: CUDA graphs captured earlier still point into it.
  void* scratch(size_t bytes) {
    if (bytes == 0) return nullptr;
    if (bytes > scratch_bytes_) {
      retired_scratch_.push_back(std::move(scratch_));
      scratch_bytes_ = std::max(bytes, scratch_bytes_ * 2);
      scratch_ = device_memory(scratch_bytes_);
    }
    return scratch_.get();
  }

  // Takes (and so clears) the launch error, so that one failed op does not fail every later one.
  void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

  const void* on_device(const Tensor& tensor, const char* op) const {
    SHARDLM_CHECK(tensor.device() == device(), op, " on ", name(), ": operand ", tensor.describe(), " is on ",
                  tensor.device().to_string(), "; weights and inputs must be placed on this device first");
    return tensor.raw();
  }
  const void* defined_on_device(const Tensor* tensor, const char* op) const {
    return tensor && tensor->defined() && tensor->numel() ? on_device(*tensor, op) : nullptr;
  }
  void* writable_on_device(const Tensor& tensor, const char* op) const {
    on_device(tensor, op);
    return tensor.mutable_raw();
  }
  const float* f32_on_device(const Tensor& tensor, const char* op) const {
    SHARDLM_CHECK(tensor.dtype() == DType::f32, op, ": expected a float32 activation, got ", tensor.describe());
    return static_cast<const float*>(on_device(tensor, op));
  }
  float* out_on_device(const Tensor& tensor, const char* op) const {
    SHARDLM_CHECK(tensor.dtype() == DType::f32, op, ": expected a float32 output, got ", tensor.describe());
    return static_cast<float*>(writable_on_device(tensor, op));
  }
  const int32_t* ids_on_device(const Tensor& tensor, const char* op) const {
    SHARDLM_CHECK(tensor.dtype() == DType::i32, op, ": expected int32 ids or positions, got ", tensor.describe());
    return static_cast<const int32_t*>(on_device(tensor, op));
  }
  static const Tensor& on_host(const Tensor& tensor, const char* op) {
    SHARDLM_CHECK(tensor.device().kind == DeviceKind::cpu, op, ": ", tensor.describe(), " must be a host tensor, not on ",
                  tensor.device().to_string());
    return tensor;
  }
  static void check_same_size(const Tensor& source, const Tensor& destination, const char* op) {
    SHARDLM_CHECK(source.nbytes() == destination.nbytes(), op, ": ", source.describe(), " and ", destination.describe(),
                  " differ in size");
  }

  int device_index_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t blas_ = nullptr;
  std::shared_ptr<void> workspace_;
  std::shared_ptr<void> scratch_;
  size_t scratch_bytes_ = 0;
  std::vector<std::shared_ptr<void>> retired_scratch_;
  std::map<MatmulKey, MatmulPlan> plans_;
  bool graphs_enabled_ = true;
};

}  // namespace

BackendInfo device_info() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    return {"cuda", false, 0,
            status != cudaSuccess ? str_cat("no usable CUDA driver or device: ", cudaGetErrorString(status))
                                  : std::string("no CUDA device is visible")};
  std::string names;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, i) != cudaSuccess) continue;
    names += str_cat(names.empty() ? "" : ", ", "cuda:", i, " ", properties.name, " (",
                     properties.totalGlobalMem >> 20, " MiB, sm_", properties.major, properties.minor, ")");
  }
  return {"cuda", true, count, names};
}

std::unique_ptr<Backend> create_backend(int device_index) { return std::make_unique<CudaBackend>(device_index); }

void* stream_of(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  return cuda ? static_cast<void*>(cuda->stream()) : nullptr;
}

}  // namespace shardlm::backends::cuda
