#pragma once
// A C++ face over a PJRT plugin's C function table (pjrt_abi.h): load the library,
// create a client, move buffers, compile StableHLO, execute, serialize. Every PJRT_Error
// becomes a PjrtError carrying the plugin's message and code; calls that some plugins
// answer by aborting the process (empty compile options) are refused before they are made.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Buffer;
struct PJRT_LoadedExecutable;
struct PJRT_TopologyDescription;

namespace shardlm::backends::pjrt {

// A PJRT call failed: the plugin's message, its code (absl status codes: 3 invalid
// argument, 5 not found, 9 failed precondition, ...), and which call.
class PjrtError : public Error {
 public:
  PjrtError(const std::string& message, int code) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// One loaded plugin library. Plugins are never unloaded (their static state and threads
// outlive any client), so load() returns the same Plugin for the same path.
class Plugin {
 public:
  // Loads and initializes the library at `path`. Clear errors (naming the path and what to
  // do) for: a missing file, a file that is not a shared library, one without GetPjrtApi,
  // an API major version other than 0 or a minor version older than we support, and a
  // function table too short for the slots we call.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const std::string& path() const { return path_; }
  int api_major() const { return api_major_; }
  int api_minor() const { return api_minor_; }
  // PJRT_Plugin_Attributes as text (e.g. "stablehlo_current_version" -> "1.20.0",
  // "stablehlo_minimum_version" -> "0.9.0"); int64 lists joined with '.'.
  const std::vector<std::pair<std::string, std::string>>& attributes() const { return attributes_; }
  std::string attribute(const std::string& name) const;  // "" when absent
  const PJRT_Api* api() const { return api_; }

 private:
  std::string path_;
  const PJRT_Api* api_ = nullptr;
  int api_major_ = 0, api_minor_ = 0;
  std::vector<std::pair<std::string, std::string>> attributes_;
};

// A client create option (PJRT_NamedValue): "cpu_device_count" = int64_t{4}, ...
struct NamedOption {
  std::string name;
  std::variant<int64_t, std::string, bool, float> value;
};

// A device buffer, destroyed with its owner. Shape and dtype as PJRT reports them.
class Buffer {
 public:
  Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Shape shape() const;
  DType dtype() const;
  // True once the buffer was donated to an execution (its memory now belongs to an output).
  bool is_deleted() const;
  // Copies the whole buffer into `destination` (exactly its size in bytes), waiting for it.
  void to_host(void* destination, size_t bytes) const;
  PJRT_Buffer* get() const { return buffer_; }

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Buffer* buffer_;
};

// A compiled, loaded program.
class Executable {
 public:
  Executable(std::shared_ptr<Plugin> plugin, PJRT_LoadedExecutable* executable);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  size_t num_outputs() const { return num_outputs_; }
  // Devices it runs on (one per SPMD partition or replica), in argument-list order.
  size_t num_devices() const { return num_devices_; }
  // Runs once on every device: arguments[d] are device d's argument buffers in parameter
  // order. Donated parameters (tf.aliasing_output) are consumed: their Buffers report
  // is_deleted() afterwards and must not be passed again. Waits until every device is done
  // and returns outputs[d][i].
  std::vector<std::vector<std::unique_ptr<Buffer>>> execute(std::span<const std::vector<PJRT_Buffer*>> arguments);
  // PJRT_Executable_Serialize: bytes that deserialize() turns back into this program.
  std::string serialize() const;

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_LoadedExecutable* executable_;
  size_t num_outputs_ = 0, num_devices_ = 0;
};

class Client {
 public:
  // PJRT_Client_Create with `options`; a failure (libtpu without a TPU: "No jellyfish device
  // found") is a PjrtError naming the plugin's path.
  Client(std::shared_ptr<Plugin> plugin, const std::vector<NamedOption>& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::shared_ptr<Plugin>& plugin() const { return plugin_; }
  const std::string& platform_name() const { return platform_name_; }        // "cpu", "cuda", "tpu"
  const std::string& platform_version() const { return platform_version_; }  // plugin-specific
  int device_count() const { return static_cast<int>(devices_.size()); }    // addressable devices
  // What an executable compiled here is compatible with, as the compile cache keys it: the
  // platform and version of the client's topology where the plugin describes one (so that
  // a Topology of the same chips, compiling on a machine without them, keys the same),
  // else the client's platform and version.
  const std::string& compiled_for() const { return compiled_for_; }

  // A device buffer holding a copy of `bytes` bytes at `data` (shape and dtype as given);
  // `data` may be freed once this returns.
  std::unique_ptr<Buffer> upload(const void* data, DType dtype, const Shape& shape, int device);
  // Compiles textual StableHLO (`func.func public @main`). `compile_options` is a serialized
  // xla.CompileOptionsProto (compile_options_bytes()); empty is refused.
  std::unique_ptr<Executable> compile(const std::string& mlir, const std::string& compile_options);
  // PJRT_Executable_DeserializeAndLoad of serialize()'s bytes.
  std::unique_ptr<Executable> deserialize(const std::string& bytes);

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_, platform_version_, compiled_for_;
  std::vector<void*> devices_;  // PJRT_Device*
};

// Devices described, not present (libtpu: "v5e:2x2" on a machine without a TPU): a plugin
// compiles for them (PJRT_Compile), and a machine that has them loads the serialized
// executables from the compile cache. Plugins without the topology slots, or that refuse
// the name, give a PjrtError naming the plugin.
class Topology {
 public:
  Topology(std::shared_ptr<Plugin> plugin, const std::string& name);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  const std::string& name() const { return name_; }
  const std::shared_ptr<Plugin>& plugin() const { return plugin_; }
  int device_count() const { return device_count_; }
  const std::string& compiled_for() const { return compiled_for_; }  // as Client::compiled_for()
  // PJRT_Compile, then PJRT_Executable_Serialize: the bytes Client::deserialize loads.
  std::string compile(const std::string& mlir, const std::string& compile_options);

 private:
  std::shared_ptr<Plugin> plugin_;
  std::string name_, compiled_for_;
  PJRT_TopologyDescription* topology_ = nullptr;
  int device_count_ = 0;
};

// xla.CompileOptionsProto bytes for a program over `partitions` SPMD partitions (1: one
// device), hand-encoded: executable_build_options { num_replicas: 1, num_partitions: N,
// use_spmd_partitioning: N > 1 }.
std::string compile_options_bytes(int partitions);

}  // namespace shardlm::backends::pjrt
