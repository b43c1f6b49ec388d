#include "backends/pjrt/pjrt_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#include "backends/pjrt/lowering.h"
#include "backends/pjrt/program_cache.h"
#include "core/logging.h"

namespace shardlm::backends::pjrt {
namespace hlo = stablehlo;

namespace {

// What the plugin at `path` reads from the environment when it loads.
void prepare_environment(const std::string& path) {
  // XLA logs through absl to stderr (partitioner notices, per-compile INFO lines): shown
  // only with --verbose, unless the user set the level.
  if (log::level() > log::Level::info) ::setenv("TF_CPP_MIN_LOG_LEVEL", "2", /*overwrite=*/0);
  // XLA:CPU copies a donated KV cache that the same program also reads unless its copy
  // insertion analyses regions (a decode step's time then grows with max_cache_len). The
  // flag is XLA:CPU's: other plugins' flag parsers may reject it.
  const std::string file = std::filesystem::path(path).filename().string();
  if (file.find("cpu") != std::string::npos) {
    std::string flags = std::getenv("XLA_FLAGS") ? std::getenv("XLA_FLAGS") : "";
    if (flags.find("xla_cpu_copy_insertion_use_region_analysis") == std::string::npos)
      ::setenv("XLA_FLAGS", (flags + " --xla_cpu_copy_insertion_use_region_analysis=true").c_str(), 1);
  }
  // Without a TPU, libtpu retries the cloud metadata server for minutes before it says so.
  if (path.find("libtpu") != std::string::npos && !std::getenv("SHARDLM_TPU_QUERY_METADATA"))
    ::setenv("TPU_SKIP_MDS_QUERY", "1", /*overwrite=*/0);
}

}  // namespace

// One client per plugin per process: libtpu takes its chips for the process, and every
// backend and `shardlm devices` share what the plugin set up.
std::shared_ptr<Client> shared_client(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Client>> clients;
  std::lock_guard lock(mutex);
  auto found = clients.find(path);
  if (found != clients.end()) return found->second;
  prepare_environment(path);
  std::shared_ptr<Client> client;
  try {
    client = std::make_shared<Client>(Plugin::load(path), std::vector<NamedOption>{});
  } catch (const PjrtError& error) {
    throw PjrtError(str_cat(error.what(), "\nThe plugin loaded but could not start a client: its devices are missing "
                                          "or not visible to this process (libtpu needs a TPU VM). `shardlm devices` "
                                          "shows what each plugin finds; --device cpu runs without one."),
                    error.code());
  }
  return clients.emplace(path, std::move(client)).first->second;
}

namespace {

DeviceStorage& storage_of(const Tensor& tensor) {
  SHARDLM_CHECK(tensor.device().kind == DeviceKind::pjrt && tensor.owner(), "pjrt backend: ", tensor.describe(),
                " is not a tensor on a pjrt device (on ", tensor.device().to_string(), ")");
  return *static_cast<DeviceStorage*>(const_cast<void*>(tensor.owner()));
}

// The element of its storage where a view (slice_rows) starts.
int64_t offset_of(const Tensor& tensor) {
  const auto bytes = static_cast<const std::byte*>(tensor.raw()) - static_cast<const std::byte*>(tensor.owner());
  return static_cast<int64_t>(bytes) / static_cast<int64_t>(dtype_size(tensor.dtype()));
}

// A whole storage, not a part of one: what an op may write.
DeviceStorage& whole_storage_of(const Tensor& tensor) {
  DeviceStorage& storage = storage_of(tensor);
  SHARDLM_CHECK(offset_of(tensor) == 0 && tensor.numel() == storage.shape.numel(), "pjrt backend: cannot write ",
                tensor.describe(), ", a part of a ", storage.shape.to_string(), " buffer (device buffers are immutable)");
  return storage;
}

// Programs compiled for this client, by text; compiles, or loads from the on-disk cache.
// With a Topology instead of a client (devices described, not present) it compiles into
// the on-disk cache only, and get() returns null: nothing here can run the program.
class ProgramCompiler {
 public:
  ProgramCompiler(std::shared_ptr<Client> client, std::shared_ptr<Topology> topology,
                  const std::string& cache_directory, int partitions)
      : client_(std::move(client)), topology_(std::move(topology)), disk_(cache_directory), partitions_(partitions) {
    SHARDLM_CHECK(!topology_ || disk_.enabled(), "compiling for topology ", topology_ ? topology_->name() : "",
                  " keeps the programs in the compile cache only: --compile-cache none leaves nowhere to put them");
  }

  std::shared_ptr<Executable> get(const std::string& text, const std::string& key) {
    auto found = memory_.find(text);
    if (found != memory_.end()) return found->second;
    const std::string options = compile_options_bytes(partitions_);
    // XLA_FLAGS change what the plugin compiles, so they are part of the file's key.
    const char* flags = std::getenv("XLA_FLAGS");
    const std::string file = ProgramCache::key(text, options, identity() + " XLA_FLAGS=" + (flags ? flags : ""));
    if (topology_) {
      compile_into_cache(text, options, file, key);
      return memory_.emplace(text, nullptr).first->second;
    }
    std::shared_ptr<Executable> executable;
    const auto start = std::chrono::steady_clock::now();
    if (std::optional<std::string> bytes = disk_.load(file)) {
      try {
        executable = client_->deserialize(*bytes);
        ++stats_.loaded_from_cache;
        log::info(str_cat("pjrt: loaded [", key, "] from ", disk_.directory(), "/", file, ".pjrt"));
      } catch (const Error& error) {
        log::warning(str_cat("compile cache: ", file, " does not load (", error.what(), "): compiling again"));
      }
    }
    if (!executable) {
      executable = client_->compile(text, options);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++stats_.compiled;
      stats_.compile_seconds += seconds;
      log::info(str_cat("pjrt: compiled [", key, "] in ", seconds, " s"));
      if (disk_.enabled()) disk_.store(file, executable->serialize());
    }
    return memory_.emplace(text, executable).first->second;
  }

  std::string identity() const {
    const Plugin& plugin = client_ ? *client_->plugin() : *topology_->plugin();
    return str_cat(client_ ? client_->compiled_for() : topology_->compiled_for(), " pjrt ", plugin.api_major(), ".",
                   plugin.api_minor(), partitions_ > 1 ? str_cat(" spmd ", partitions_) : "");
  }
  const ProgramStats& stats() const { return stats_; }

 private:
  void compile_into_cache(const std::string& text, const std::string& options, const std::string& file,
                          const std::string& key) {
    if (disk_.load(file)) {
      ++stats_.loaded_from_cache;
      log::info(str_cat("pjrt: [", key, "] for topology ", topology_->name(), " is already in ", disk_.directory()));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    const std::string bytes = topology_->compile(text, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.compiled;
    stats_.compile_seconds += seconds;
    log::info(str_cat("pjrt: compiled [", key, "] for topology ", topology_->name(), " in ", seconds, " s"));
    SHARDLM_CHECK(disk_.store(file, bytes), "compile cache: the program compiled for topology ", topology_->name(),
                  " could not be written to ", disk_.directory(), ": set --compile-cache to a writable directory");
  }

  std::shared_ptr<Client> client_;
  std::shared_ptr<Topology> topology_;
  ProgramCache disk_;
  std::map<std::string, std::shared_ptr<Executable>> memory_;
  ProgramStats stats_;
  int partitions_;
};

class PjrtBackend;

// A compiled whole graph: parameters' buffers in, results' buffers out.
class PjrtProgram : public Program {
 public:
  PjrtProgram(PjrtBackend& backend, std::shared_ptr<Executable> executable, ProgramSpec spec)
      : backend_(backend), executable_(std::move(executable)), spec_(std::move(spec)) {}
  void run() override;

 private:
  PjrtBackend& backend_;
  std::shared_ptr<Executable> executable_;
  ProgramSpec spec_;
};

class PjrtBackend : public Backend {
 public:
  // Exactly one of `client` (devices to run on) and `topology` (devices to compile for).
  PjrtBackend(std::shared_ptr<Client> client, std::shared_ptr<Topology> topology, const PjrtTarget& target,
              const BackendOptions& options)
      : client_(std::move(client)),
        topology_(std::move(topology)),
        target_(target),
        partitions_(options.partitions),
        compiler_(client_, topology_, options.compile_cache_dir, options.partitions) {
    const int devices = client_ ? client_->device_count() : topology_->device_count();
    const std::string where = client_ ? str_cat("the plugin ", client_->plugin()->path())
                                      : str_cat("topology ", topology_->name());
    SHARDLM_CHECK(target.device_index >= 0 && target.device_index < devices, "device ", target.kind, ":",
                  target.device_index, ": ", where, " has ", devices, " devices (0..", devices - 1, ")");
    SHARDLM_CHECK(partitions_ >= 1 && target.device_index + partitions_ <= devices, "tp_size ", partitions_, " on ",
                  target.kind, ":", target.device_index, ": ", where, " has ", devices, " devices: lower --tp-size");
  }

  std::string name() const override { return target_.kind; }
  Device device() const override { return {DeviceKind::pjrt, target_.device_index}; }
  bool compiles_graphs() const override { return true; }
  bool supports_views() const override { return false; }
  StoredView stored_view(const Tensor& tensor) const override {
    return {&storage_of(tensor), storage_of(tensor).shape, offset_of(tensor)};
  }
  std::string compiler_identity() const override { return compiler_.identity(); }
  ProgramStats program_stats() const override {
    ProgramStats stats = compiler_.stats();
    stats.donations_taken = donations_taken_;
    stats.donations_refused = donations_refused_;
    return stats;
  }

  int partitions() const override { return partitions_; }
  std::string placement_attributes(const Tensor& tensor) const override {
    return sharding_attribute(storage_of(tensor), partitions_);
  }

  Tensor allocate(Shape shape, DType dtype) override { return allocate_split(std::move(shape), dtype, -1); }
  // A split that does not divide evenly keeps the tensor whole on every device.
  Tensor allocate_split(Shape shape, DType dtype, int split_dim) override {
    if (partitions_ == 1 || split_dim < 0 || split_dim >= static_cast<int>(shape.rank()) ||
        shape[static_cast<size_t>(split_dim)] % partitions_ != 0)
      split_dim = -1;
    auto storage = std::make_shared<DeviceStorage>(
        DeviceStorage{.shape = shape, .dtype = dtype, .split_dim = split_dim, .buffers = {}, .host_copy = {}});
    DeviceStorage* raw = storage.get();
    return Tensor::wrap(std::move(storage), raw, std::move(shape), dtype, /*writable=*/true, device());
  }

  Tensor to_device(const Tensor& host) override { return to_device_split(host, -1); }
  Tensor to_device_split(const Tensor& host, int split_dim) override {
    Tensor device_tensor = allocate_split(host.shape(), host.dtype(), split_dim);
    copy_from_host(host, device_tensor);
    if (host.quantized())
      return device_tensor.with_block_scales(to_device_split(host.block_scales(), storage_of(device_tensor).split_dim));
    return device_tensor;
  }

  void copy_from_host(const Tensor& source, const Tensor& destination) override {
    DeviceStorage& storage = whole_storage_of(destination);
    SHARDLM_CHECK(source.nbytes() == destination.nbytes() && source.dtype() == storage.dtype,
                  "pjrt copy_from_host: ", source.describe(), " into ", destination.describe());
    if (client_) upload(*client_, storage, source.raw(), target_.device_index, partitions_);
    storage.host_copy.clear();
    if (source.dtype() == DType::i32 && source.numel() <= 65536)
      storage.host_copy.assign(source.data<int32_t>(), source.data<int32_t>() + source.numel());
  }

  void copy_to_host(const Tensor& source, const Tensor& destination) override {
    DeviceStorage& storage = whole_storage_of(source);
    SHARDLM_CHECK(source.nbytes() == destination.nbytes(), "pjrt copy_to_host: ", source.describe(), " into ",
                  destination.describe());
    materialize(storage);
    download(storage, destination.mutable_raw());
  }

  void copy(const Tensor& source, const Tensor& destination) override {
    Tensor host = Tensor::empty(source.shape(), source.dtype());
    copy_to_host(source, host);
    copy_from_host(host, destination);
  }

  // Compiling for a topology leaves nothing to run on.
  void require_devices() const {
    if (!client_)
      fail("pjrt: compiled for topology ", topology_->name(), ", whose devices this machine does not have: the "
           "programs are in the compile cache; run them on a machine with those devices");
  }

  // Buffers for every parameter: one never written reads as zeros.
  void materialize(DeviceStorage& storage) {
    require_devices();
    if (storage.buffers.empty()) {
      const Tensor zeros = Tensor::zeros(storage.shape, storage.dtype);
      upload(*client_, storage, zeros.raw(), target_.device_index, partitions_);
    }
    SHARDLM_CHECK(!storage.buffers[0]->is_deleted(), "pjrt backend: a ", dtype_name(storage.dtype),
                  storage.shape.to_string(), " buffer was donated to a program and not replaced");
  }

  // Checks that the i32 tensor's last upload holds only values below `limit`.
  void check_below(const DeviceStorage& storage, int64_t limit, const char* what) const {
    for (int32_t v : storage.host_copy)
      SHARDLM_CHECK(v < limit, what, " ", v, " is outside the KV cache (max_cache_len ", limit,
                    "): lower the prompt length or max_new_tokens, or raise max_cache_len");
  }

  void check_rows(const DeviceStorage& storage, int64_t slots, const char* op) const {
    check_cache_rows(storage.host_copy.data(), static_cast<int64_t>(storage.host_copy.size()), slots, op);
  }

  // Runs `buffers` through `executable` on this device; outputs replace `results`' buffers.
  // `donated[i]` >= 0 marks parameter i as donated (counted as taken or refused).
  void execute(Executable& executable, const std::vector<Tensor>& parameters, const std::vector<Tensor>& results,
               const std::vector<int>& donated = {}) {
    require_devices();
    std::vector<std::vector<PJRT_Buffer*>> per_device(static_cast<size_t>(partitions_));
    for (const Tensor& parameter : parameters) {
      DeviceStorage& storage = storage_of(parameter);
      materialize(storage);
      for (int d = 0; d < partitions_; ++d) per_device[d].push_back(storage.buffers.at(d)->get());
    }
    auto outputs = executable.execute(per_device);
    for (size_t i = 0; i < donated.size(); ++i)
      if (donated[i] >= 0) ++(storage_of(parameters[i]).buffers[0]->is_deleted() ? donations_taken_ : donations_refused_);
    SHARDLM_CHECK(outputs.size() == per_device.size() && outputs[0].size() == results.size(),
                  "pjrt: the program returned ", outputs.empty() ? 0 : outputs[0].size(), " results, expected ",
                  results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      DeviceStorage& storage = whole_storage_of(results[i]);
      storage.buffers.clear();
      for (auto& device_outputs : outputs) storage.buffers.push_back(std::move(device_outputs[i]));
    }
  }

  std::unique_ptr<Program> compile_program(const ProgramSpec& spec) override {
    return std::make_unique<PjrtProgram>(*this, compiler_.get(spec.text, spec.key), spec);
  }

  // One op as a program of its own: parameters are `inputs` (as stored), `build` maps
  // their values (seen with each tensor's shape) to the results written into `outputs`.
  // `donated`: the input whose memory becomes output 0 (the KV cache), or -1.
  using Build = std::function<std::vector<hlo::Value>(hlo::Program&, const std::vector<hlo::Value>&)>;
  void run_op(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
              const Build& build, int donated = -1) {
    hlo::Program program(partitions_);
    std::vector<hlo::Value> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const DeviceStorage& storage = storage_of(inputs[i]);
      const hlo::Value parameter = program.parameter(hlo::type_of(storage.shape, storage.dtype),
                                                     sharding_attribute(storage, partitions_));
      if (static_cast<int>(i) == donated) program.add_parameter_attribute(i, "tf.aliasing_output = 0 : i32");
      values.push_back(hlo::view(program, parameter, offset_of(inputs[i]), inputs[i].shape().dims()));
    }
    std::vector<hlo::Value> results = build(program, values);
    std::vector<std::string> placements;
    for (size_t i = 0; i < results.size(); ++i) {
      results[i] = program.reshape(results[i], storage_of(outputs[i]).shape.dims());
      placements.push_back(sharding_attribute(storage_of(outputs[i]), partitions_));
    }
    std::shared_ptr<Executable> executable = compiler_.get(program.text(results, placements), op);
    require_devices();
    std::vector<int> donations(inputs.size(), -1);
    if (donated >= 0) donations[donated] = 0;
    execute(*executable, inputs, outputs, donations);
  }

  // A weight's parameters: the tensor, then its block scales when int8.
  static std::vector<Tensor> weight_inputs(const Tensor& weight) {
    if (weight.quantized()) return {weight, weight.block_scales()};
    return {weight};
  }
  static hlo::Weight weight_at(const std::vector<hlo::Value>& v, size_t i, const Tensor& weight) {
    return weight.quantized() ? hlo::Weight{v[i], v[i + 1]} : hlo::Weight{v[i]};
  }
  static std::vector<Tensor> join(std::vector<Tensor> a, const std::vector<Tensor>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, const Tensor& out) override {
    run_op("embedding", join(weight_inputs(table), {ids}), {out}, [&](hlo::Program& p, const auto& v) {
      return std::vector{hlo::embedding(p, weight_at(v, 0, table), v.back(), first_row)};
    });
  }

  void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) override {
    std::vector<Tensor> inputs = join({x}, weight_inputs(weight));
    if (bias.defined() && bias.numel()) inputs.push_back(bias);
    run_op("linear", inputs, {out}, [&](hlo::Program& p, const auto& v) {
      const size_t bias_index = 1 + weight_inputs(weight).size();
      std::optional<hlo::Value> b;
      if (v.size() > bias_index) b = v[bias_index];
      return std::vector{hlo::linear(p, v[0], weight_at(v, 1, weight), b)};
    });
  }

  void linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                       const Tensor& out) override {
    linear(x, weight, bias, out);
    add(out, residual, out);
  }

  void gated_linear(const Tensor& x, const Tensor& gate_weight, const Tensor& gate_bias, const Tensor& up_weight,
                    const Tensor& up_bias, const Tensor& out) override {
    Tensor up = allocate(out.shape(), DType::f32);
    linear(x, gate_weight, gate_bias, out);
    linear(x, up_weight, up_bias, up);
    silu_mul(out, up, out);
  }

  void rms_norm_linear(const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& weight, const Tensor& bias,
                       const Tensor& out) override {
    Tensor normed = allocate(x.shape(), DType::f32);
    rms_norm(x, norm_weight, eps, normed);
    linear(normed, weight, bias, out);
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    run_op("rms_norm", {x, weight}, {out}, [&](hlo::Program& p, const auto& v) {
      return std::vector{hlo::rms_norm(p, v[0], {v[1]}, eps)};
    });
  }

  void rope(const Tensor& x, const Tensor& positions, const RotaryEmbedding& rotary) override {
    const DeviceStorage& stored = storage_of(positions);
    int64_t table_positions = 1;
    for (int32_t position : stored.host_copy) table_positions = std::max<int64_t>(table_positions, position + 1);
    const auto [cos, sin] = hlo::rotary_tables(rotary, table_positions);
    const std::vector<Tensor> tables{to_device(cos), to_device(sin)};
    run_op("rope", {x, positions, tables[0], tables[1]}, {x}, [&](hlo::Program& p, const auto& v) {
      return std::vector{hlo::rope(p, v[0], v[1], {v[2], v[3]}, rotary)};
    });
  }

  void kv_cache_write(const Tensor& cache, const Tensor& entries, const Tensor& positions,
                      const Tensor& cache_rows) override {
    check_below(storage_of(positions), cache.shape()[2], "position");
    check_rows(storage_of(cache_rows), cache.shape()[0], "kv_cache_write");
    run_op("kv_cache_write", {cache, entries, positions, cache_rows}, {cache}, [&](hlo::Program& p, const auto& v) {
      return std::vector{hlo::kv_cache_write(p, v[0], v[1], v[2], v[3])};
    }, /*donated=*/0);
  }

  void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& positions,
                 const Tensor& cache_rows, float scale, int64_t sliding_window, const Tensor& out) override {
    check_below(storage_of(positions), k_cache.shape()[2], "attention: position");
    check_rows(storage_of(cache_rows), k_cache.shape()[0], "attention");
    run_op("attention", {q, k_cache, v_cache, positions, cache_rows}, {out}, [&](hlo::Program& p, const auto& v) {
      return std::vector{hlo::attention(p, v[0], v[1], v[2], std::nullopt, v[3], v[4], scale, sliding_window)};
    });
  }

  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    run_op("silu_mul", {gate, up}, {out},
           [&](hlo::Program& p, const auto& v) { return std::vector{hlo::silu_mul(p, v[0], v[1])}; });
  }

  void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    run_op("gelu_tanh_mul", {gate, up}, {out},
           [&](hlo::Program& p, const auto& v) { return std::vector{hlo::gelu_tanh_mul(p, v[0], v[1])}; });
  }

  void scale(const Tensor& x, float factor, const Tensor& out) override {
    run_op("scale", {x}, {out},
           [&](hlo::Program& p, const auto& v) { return std::vector{hlo::scale(p, v[0], factor)}; });
  }

  void softcap(const Tensor& x, float cap, const Tensor& out) override {
    run_op("softcap", {x}, {out},
           [&](hlo::Program& p, const auto& v) { return std::vector{hlo::softcap(p, v[0], cap)}; });
  }

  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    run_op("add", {a, b}, {out}, [&](hlo::Program& p, const auto& v) { return std::vector{p.add(v[0], v[1])}; });
  }

  void gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) override {
    run_op("gather_rows", {x, indices}, {out},
           [&](hlo::Program& p, const auto& v) { return std::vector{hlo::gather_rows(p, v[0], v[1])}; });
  }

  void copy_columns(const Tensor& source, int64_t source_column, const Tensor& destination,
                    int64_t destination_column, int64_t width) override {
    run_op("copy_columns", {source, destination}, {destination}, [&](hlo::Program& p, const auto& v) {
      const int64_t columns = v[1].type.dims[1];
      std::vector<hlo::Value> parts;
      if (destination_column > 0) parts.push_back(p.slice_last(v[1], 0, destination_column));
      parts.push_back(p.slice_last(v[0], source_column, source_column + width));
      if (destination_column + width < columns) parts.push_back(p.slice_last(v[1], destination_column + width, columns));
      return std::vector{p.concatenate(parts, 1)};
    });
  }

  void top_k(const Tensor& logits, const Tensor& values, const Tensor& indices) override {
    run_op("top_k", {logits}, {values, indices},
           [&](hlo::Program& p, const auto& v) { return hlo::top_k(p, v[0], values.shape()[1]); });
  }
  int64_t max_top_k() const override { return 1024; }

 private:
  std::shared_ptr<Client> client_;
  std::shared_ptr<Topology> topology_;
  PjrtTarget target_;
  int partitions_;
  ProgramCompiler compiler_;
  int64_t donations_taken_ = 0, donations_refused_ = 0;
};

void PjrtProgram::run() {
  backend_.require_devices();
  for (const auto& [parameter, limit] : spec_.bounded)
    backend_.check_below(storage_of(spec_.parameters[parameter]), limit, "position");
  for (const auto& [parameter, slots] : spec_.cache_rows)
    backend_.check_rows(storage_of(spec_.parameters[parameter]), slots, "step");
  backend_.execute(*executable_, spec_.parameters, spec_.results, spec_.donated);
}

}  // namespace

std::unique_ptr<Backend> create_backend(const PjrtTarget& target, const BackendOptions& options) {
  std::string searched;
  const std::string path = find_plugin(target.kind, options.pjrt_plugin, &searched);
  if (path.empty())
    fail("device '", target.kind, "': no PJRT plugin found (looked at ", searched, "). ",
         target.kind == "tpu" ? "Install libtpu (pip install libtpu) or point --pjrt-plugin / TPU_LIBRARY_PATH at libtpu.so"
                              : "Point --pjrt-plugin or SHARDLM_PJRT_PLUGIN at a plugin .so (e.g. "
                                "pjrt_c_api_cpu_plugin.so from the lammps-jax-pjrt-cpu wheel; docs/PJRT.md)");
  if (!options.pjrt_topology.empty()) {
    prepare_environment(path);
    return std::make_unique<PjrtBackend>(nullptr, std::make_shared<Topology>(Plugin::load(path), options.pjrt_topology),
                                         target, options);
  }
  return std::make_unique<PjrtBackend>(shared_client(path), nullptr, target, options);
}

}  // namespace shardlm::backends::pjrt
