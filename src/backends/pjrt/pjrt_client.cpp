#include "backends/pjrt/pjrt_client.h"

#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>

#include "backends/pjrt/pjrt_abi.h"
#include "core/logging.h"

namespace shardlm::backends::pjrt {
namespace {

// 0.57 rearranged the PJRT_Api table; from 0.57 on every slot pjrt_abi.h declares sits at
// the offset declared there. Struct fields added since then are ones we leave zero, which
// an older plugin never reads.
constexpr int min_api_minor = 57;

constexpr const char* plugin_hint =
    "set SHARDLM_PJRT_PLUGIN or --pjrt-plugin to the plugin's .so, e.g. pjrt_c_api_cpu_plugin.so from the "
    "lammps-jax-pjrt-cpu wheel";

// Every *_Args struct goes out zeroed with its own size: fields we do not set stay at
// their defaults, and the plugin learns which header we were built against.
template <typename Args>
Args make_args() {
  Args args{};
  args.struct_size = sizeof(Args);
  return args;
}

std::string error_message(const PJRT_Api* api, PJRT_Error* error) {
  auto args = make_args<PJRT_Error_Message_Args>();
  args.error = error;
  api->PJRT_Error_Message(&args);
  std::string message(args.message, args.message_size);
  // XLA's messages often end in a newline, which would split "[code N]" onto its own line.
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) message.pop_back();
  return message;
}

int error_code(const PJRT_Api* api, PJRT_Error* error) {
  auto args = make_args<PJRT_Error_GetCode_Args>();
  args.error = error;
  PJRT_Error* failed = api->PJRT_Error_GetCode(&args);
  if (failed == nullptr) return static_cast<int>(args.code);
  auto destroy = make_args<PJRT_Error_Destroy_Args>();
  destroy.error = failed;
  api->PJRT_Error_Destroy(&destroy);
  return static_cast<int>(PJRT_Error_Code_UNKNOWN);
}

// Reads and destroys `error`; returns what it said.
std::pair<std::string, int> take_error(const PJRT_Api* api, PJRT_Error* error) {
  std::pair<std::string, int> taken{error_message(api, error), error_code(api, error)};
  auto args = make_args<PJRT_Error_Destroy_Args>();
  args.error = error;
  api->PJRT_Error_Destroy(&args);
  return taken;
}

// Every PJRT_Error the plugin returns passes through here, so none is leaked.
void check(const Plugin& plugin, PJRT_Error* error, const char* call) {
  if (error == nullptr) return;
  auto [message, code] = take_error(plugin.api(), error);
  throw PjrtError(str_cat("PJRT ", call, " (", plugin.path(), "): ", message, " [code ", code, "]"), code);
}

// For destructors, which must not throw: a failure is logged and dropped.
void check_quietly(const Plugin& plugin, PJRT_Error* error, const char* call) {
  if (error == nullptr) return;
  auto [message, code] = take_error(plugin.api(), error);
  log::warning(str_cat("PJRT ", call, " (", plugin.path(), "): ", message, " [code ", code, "]"));
}

void destroy_event(const Plugin& plugin, PJRT_Event* event) {
  auto args = make_args<PJRT_Event_Destroy_Args>();
  args.event = event;
  check_quietly(plugin, plugin.api()->PJRT_Event_Destroy(&args), "PJRT_Event_Destroy");
}

// Waits for `event` and destroys it, then throws the error it carried, if any.
void await_event(const Plugin& plugin, PJRT_Event* event, const char* call) {
  if (event == nullptr) return;
  auto args = make_args<PJRT_Event_Await_Args>();
  args.event = event;
  PJRT_Error* error = plugin.api()->PJRT_Event_Await(&args);
  destroy_event(plugin, event);
  check(plugin, error, call);
}

PJRT_Buffer_Type buffer_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return PJRT_Buffer_Type_F32;
    case DType::bf16: return PJRT_Buffer_Type_BF16;
    case DType::f16: return PJRT_Buffer_Type_F16;
    case DType::i32: return PJRT_Buffer_Type_S32;
    case DType::i64: return PJRT_Buffer_Type_S64;
    case DType::i8: return PJRT_Buffer_Type_S8;
    case DType::u8: return PJRT_Buffer_Type_U8;
    case DType::i4:
    case DType::q4_k:
    case DType::q6_k: break;  // the weight loader keeps these on the CPU (GGUF blocks decoded elsewhere)
  }
  fail("PJRT: no buffer type for dtype ", dtype_name(dtype));
}

DType dtype_of(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_F32: return DType::f32;
    case PJRT_Buffer_Type_BF16: return DType::bf16;
    case PJRT_Buffer_Type_F16: return DType::f16;
    case PJRT_Buffer_Type_S32: return DType::i32;
    case PJRT_Buffer_Type_S64: return DType::i64;
    case PJRT_Buffer_Type_S8: return DType::i8;
    case PJRT_Buffer_Type_U8: return DType::u8;
    default: break;
  }
  fail("PJRT buffer of element type ", static_cast<int>(type),
       " (PJRT_Buffer_Type) has no shardlm dtype (f32, bf16, f16, i32, i64, i8, u8)");
}

std::string attribute_text(const PJRT_NamedValue& value) {
  switch (value.type) {
    case PJRT_NamedValue_kString: return std::string(value.string_value, value.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(value.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string text;
      for (size_t i = 0; i < value.value_size; ++i) text += str_cat(i ? "." : "", value.int64_array_value[i]);
      return text;
    }
    case PJRT_NamedValue_kFloat: return str_cat(value.float_value);
    case PJRT_NamedValue_kBool: return value.bool_value ? "true" : "false";
  }
  return str_cat("<PJRT_NamedValue type ", static_cast<int>(value.type), ">");
}

// The table slots we call; a plugin may leave ones it does not implement null.
void check_slots(const PJRT_Api* api, const std::string& path) {
  const std::pair<bool, const char*> slots[] = {
      {api->PJRT_Error_Destroy != nullptr, "PJRT_Error_Destroy"},
      {api->PJRT_Error_Message != nullptr, "PJRT_Error_Message"},
      {api->PJRT_Error_GetCode != nullptr, "PJRT_Error_GetCode"},
      {api->PJRT_Event_Destroy != nullptr, "PJRT_Event_Destroy"},
      {api->PJRT_Event_Await != nullptr, "PJRT_Event_Await"},
      {api->PJRT_Client_Create != nullptr, "PJRT_Client_Create"},
      {api->PJRT_Client_Destroy != nullptr, "PJRT_Client_Destroy"},
      {api->PJRT_Client_PlatformName != nullptr, "PJRT_Client_PlatformName"},
      {api->PJRT_Client_PlatformVersion != nullptr, "PJRT_Client_PlatformVersion"},
      {api->PJRT_Client_AddressableDevices != nullptr, "PJRT_Client_AddressableDevices"},
      {api->PJRT_Client_Compile != nullptr, "PJRT_Client_Compile"},
      {api->PJRT_Client_BufferFromHostBuffer != nullptr, "PJRT_Client_BufferFromHostBuffer"},
      {api->PJRT_Executable_Destroy != nullptr, "PJRT_Executable_Destroy"},
      {api->PJRT_Executable_NumOutputs != nullptr, "PJRT_Executable_NumOutputs"},
      {api->PJRT_LoadedExecutable_Destroy != nullptr, "PJRT_LoadedExecutable_Destroy"},
      {api->PJRT_LoadedExecutable_GetExecutable != nullptr, "PJRT_LoadedExecutable_GetExecutable"},
      {api->PJRT_LoadedExecutable_AddressableDevices != nullptr, "PJRT_LoadedExecutable_AddressableDevices"},
      {api->PJRT_LoadedExecutable_Execute != nullptr, "PJRT_LoadedExecutable_Execute"},
      {api->PJRT_Buffer_Destroy != nullptr, "PJRT_Buffer_Destroy"},
      {api->PJRT_Buffer_ElementType != nullptr, "PJRT_Buffer_ElementType"},
      {api->PJRT_Buffer_Dimensions != nullptr, "PJRT_Buffer_Dimensions"},
      {api->PJRT_Buffer_IsDeleted != nullptr, "PJRT_Buffer_IsDeleted"},
      {api->PJRT_Buffer_ToHostBuffer != nullptr, "PJRT_Buffer_ToHostBuffer"},
      {api->PJRT_Buffer_ReadyEvent != nullptr, "PJRT_Buffer_ReadyEvent"},
  };
  for (const auto& [slot, name] : slots)
    if (!slot) fail("PJRT plugin ", path, " does not implement ", name, ", which shardlm needs");
}

const PJRT_Api* open_api(const std::string& canonical, const std::string& path) {
  // RTLD_LOCAL: two plugins (CPU and CUDA) each bundle their own XLA and must not bind
  // to each other's symbols.
  void* library = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    fail("cannot load PJRT plugin ", path, ": ", why ? why : "dlopen failed", "; ", plugin_hint);
  }
  auto get_api = reinterpret_cast<PJRT_GetPjrtApi_Fn>(dlsym(library, "GetPjrtApi"));
  if (get_api == nullptr)
    fail(path, " is a shared library but exports no GetPjrtApi, so it is not a PJRT plugin; ", plugin_hint);
  const PJRT_Api* api = get_api();
  if (api == nullptr) fail("PJRT plugin ", path, ": GetPjrtApi returned no function table");
  return api;
}

void check_version(const PJRT_Api* api, const std::string& path) {
  const size_t version_end = offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version);
  if (api->struct_size < version_end)
    fail("PJRT plugin ", path, ": its function table (", api->struct_size, " bytes) has no version field");
  const int major = api->pjrt_api_version.major_version, minor = api->pjrt_api_version.minor_version;
  if (major != 0)
    fail("PJRT plugin ", path, " speaks PJRT API ", major, ".", minor,
         "; shardlm speaks 0.x: use a plugin built for PJRT 0.x (", plugin_hint, ")");
  if (minor < min_api_minor)
    fail("PJRT plugin ", path, " speaks PJRT API 0.", minor, ", older than 0.", min_api_minor,
         " (the oldest whose function table shardlm can read): use a newer plugin");
  constexpr size_t client_table_end = offsetof(PJRT_Api, PJRT_Buffer_ReadyEvent) + sizeof(void*);
  if (api->struct_size < client_table_end)
    fail("PJRT plugin ", path, ": its function table is ", api->struct_size, " bytes, shorter than the ",
         client_table_end, " that reach PJRT_Buffer_ReadyEvent: use a newer plugin");
}

// Whether the plugin's table reaches the slot at `offset` and fills it: the slots past
// PJRT_Buffer_ReadyEvent are optional.
bool has_slot(const PJRT_Api* api, size_t offset) {
  if (api->struct_size < offset + sizeof(void*)) return false;
  void* slot = nullptr;
  std::memcpy(&slot, reinterpret_cast<const char*>(api) + offset, sizeof(slot));
  return slot != nullptr;
}

std::vector<std::pair<std::string, std::string>> read_attributes(const Plugin& plugin) {
  std::vector<std::pair<std::string, std::string>> attributes;
  if (plugin.api()->PJRT_Plugin_Attributes == nullptr) return attributes;  // optional in older plugins
  auto args = make_args<PJRT_Plugin_Attributes_Args>();
  check(plugin, plugin.api()->PJRT_Plugin_Attributes(&args), "PJRT_Plugin_Attributes");
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& value = args.attributes[i];
    attributes.emplace_back(std::string(value.name, value.name_size), attribute_text(value));
  }
  return attributes;
}

void destroy_executable(const Plugin& plugin, PJRT_Executable* executable) {
  auto args = make_args<PJRT_Executable_Destroy_Args>();
  args.executable = executable;
  check_quietly(plugin, plugin.api()->PJRT_Executable_Destroy(&args), "PJRT_Executable_Destroy");
}

// A PJRT_Executable (the unloaded view of a loaded one), destroyed on scope exit.
class ExecutableView {
 public:
  ExecutableView(const Plugin& plugin, PJRT_LoadedExecutable* loaded) : plugin_(plugin) {
    auto args = make_args<PJRT_LoadedExecutable_GetExecutable_Args>();
    args.loaded_executable = loaded;
    check(plugin_, plugin_.api()->PJRT_LoadedExecutable_GetExecutable(&args), "PJRT_LoadedExecutable_GetExecutable");
    executable_ = args.executable;
  }
  ~ExecutableView() { destroy_executable(plugin_, executable_); }
  ExecutableView(const ExecutableView&) = delete;
  ExecutableView& operator=(const ExecutableView&) = delete;
  PJRT_Executable* get() const { return executable_; }

 private:
  const Plugin& plugin_;
  PJRT_Executable* executable_ = nullptr;
};

std::vector<PJRT_NamedValue> named_values(const std::vector<NamedOption>& options) {
  std::vector<PJRT_NamedValue> values;
  for (const NamedOption& option : options) {
    auto value = make_args<PJRT_NamedValue>();
    value.name = option.name.data();
    value.name_size = option.name.size();
    value.value_size = 1;
    if (auto* integer = std::get_if<int64_t>(&option.value)) {
      value.type = PJRT_NamedValue_kInt64;
      value.int64_value = *integer;
    } else if (auto* text = std::get_if<std::string>(&option.value)) {
      value.type = PJRT_NamedValue_kString;
      value.string_value = text->data();
      value.value_size = text->size();
    } else if (auto* flag = std::get_if<bool>(&option.value)) {
      value.type = PJRT_NamedValue_kBool;
      value.bool_value = *flag;
    } else {
      value.type = PJRT_NamedValue_kFloat;
      value.float_value = std::get<float>(option.value);
    }
    values.push_back(value);
  }
  return values;
}

// A textual StableHLO program for PJRT_Client_Compile / PJRT_Compile, with the inputs some
// plugins answer by aborting the process refused first.
PJRT_Program mlir_program(const std::string& mlir, const std::string& compile_options) {
  // XLA aborts the whole process on empty options (Check failed: replica_count > 0).
  SHARDLM_CHECK(!compile_options.empty(),
                "PJRT compile: empty compile options (the plugin would abort the process); pass "
                "compile_options_bytes(partitions)");
  SHARDLM_CHECK(!mlir.empty(), "PJRT compile: empty program");
  auto program = make_args<PJRT_Program>();
  program.code = const_cast<char*>(mlir.data());  // read only; the ABI field lacks const
  program.code_size = mlir.size();
  program.format = "mlir";
  program.format_size = 4;
  return program;
}

std::string serialize_executable(const Plugin& plugin, PJRT_Executable* executable) {
  SHARDLM_CHECK(plugin.api()->PJRT_Executable_Serialize != nullptr, "PJRT plugin ", plugin.path(),
                " cannot serialize executables (no PJRT_Executable_Serialize)");
  auto args = make_args<PJRT_Executable_Serialize_Args>();
  args.executable = executable;
  check(plugin, plugin.api()->PJRT_Executable_Serialize(&args), "PJRT_Executable_Serialize");
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) args.serialized_executable_deleter(args.serialized_executable);
  return bytes;
}

// "<platform name> <platform version>" of a topology.
std::string topology_identity(const Plugin& plugin, PJRT_TopologyDescription* topology) {
  const PJRT_Api* api = plugin.api();
  auto name = make_args<PJRT_TopologyDescription_PlatformString_Args>();
  name.topology = topology;
  check(plugin, api->PJRT_TopologyDescription_PlatformName(&name), "PJRT_TopologyDescription_PlatformName");
  auto version = make_args<PJRT_TopologyDescription_PlatformString_Args>();
  version.topology = topology;
  check(plugin, api->PJRT_TopologyDescription_PlatformVersion(&version), "PJRT_TopologyDescription_PlatformVersion");
  return str_cat(std::string_view(name.text, name.text_size), " ", std::string_view(version.text, version.text_size));
}

bool describes_topologies(const PJRT_Api* api) {
  return has_slot(api, offsetof(PJRT_Api, PJRT_TopologyDescription_PlatformName)) &&
         has_slot(api, offsetof(PJRT_Api, PJRT_TopologyDescription_PlatformVersion));
}

void destroy_loaded(const Plugin& plugin, PJRT_LoadedExecutable* executable) {
  auto args = make_args<PJRT_LoadedExecutable_Destroy_Args>();
  args.executable = executable;
  check_quietly(plugin, plugin.api()->PJRT_LoadedExecutable_Destroy(&args), "PJRT_LoadedExecutable_Destroy");
}

}  // namespace

// ---- Plugin -------------------------------------------------------------------------

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  std::error_code error;
  if (path.empty()) fail("no PJRT plugin given: ", plugin_hint);
  if (!std::filesystem::is_regular_file(path, error))
    fail("PJRT plugin ", path, " does not exist or is not a file; ", plugin_hint);
  const std::string canonical = std::filesystem::canonical(path, error).string();
  if (error) fail("PJRT plugin ", path, ": ", error.message(), "; ", plugin_hint);
  // Errors name the path as given, and where it led when that was a symlink.
  const std::string shown = canonical == path ? path : str_cat(path, " (", canonical, ")");

  // One Plugin per library: a second Plugin_Initialize or a second set of client threads
  // in the same process is something plugins are not written for.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Plugin>> loaded;
  std::lock_guard lock(mutex);
  if (auto found = loaded.find(canonical); found != loaded.end()) return found->second;

  auto plugin = std::make_shared<Plugin>();
  plugin->path_ = canonical;
  plugin->api_ = open_api(canonical, shown);
  check_version(plugin->api_, shown);
  plugin->api_major_ = plugin->api_->pjrt_api_version.major_version;
  plugin->api_minor_ = plugin->api_->pjrt_api_version.minor_version;
  check_slots(plugin->api_, shown);
  if (plugin->api_->PJRT_Plugin_Initialize != nullptr) {
    auto args = make_args<PJRT_Plugin_Initialize_Args>();
    check(*plugin, plugin->api_->PJRT_Plugin_Initialize(&args), "PJRT_Plugin_Initialize");
  }
  plugin->attributes_ = read_attributes(*plugin);
  loaded.emplace(canonical, plugin);
  return plugin;
}

std::string Plugin::attribute(const std::string& name) const {
  for (const auto& [key, value] : attributes_)
    if (key == name) return value;
  return "";
}

// ---- Buffer -------------------------------------------------------------------------

Buffer::Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer) : plugin_(std::move(plugin)), buffer_(buffer) {}

Buffer::~Buffer() {
  // A donated buffer still needs its handle destroyed; only its memory moved on.
  auto args = make_args<PJRT_Buffer_Destroy_Args>();
  args.buffer = buffer_;
  check_quietly(*plugin_, plugin_->api()->PJRT_Buffer_Destroy(&args), "PJRT_Buffer_Destroy");
}

Shape Buffer::shape() const {
  auto args = make_args<PJRT_Buffer_Dimensions_Args>();
  args.buffer = buffer_;
  check(*plugin_, plugin_->api()->PJRT_Buffer_Dimensions(&args), "PJRT_Buffer_Dimensions");
  return Shape(std::vector<int64_t>(args.dims, args.dims + args.num_dims));
}

DType Buffer::dtype() const {
  auto args = make_args<PJRT_Buffer_ElementType_Args>();
  args.buffer = buffer_;
  check(*plugin_, plugin_->api()->PJRT_Buffer_ElementType(&args), "PJRT_Buffer_ElementType");
  return dtype_of(args.type);
}

bool Buffer::is_deleted() const {
  auto args = make_args<PJRT_Buffer_IsDeleted_Args>();
  args.buffer = buffer_;
  check(*plugin_, plugin_->api()->PJRT_Buffer_IsDeleted(&args), "PJRT_Buffer_IsDeleted");
  return args.is_deleted;
}

void Buffer::to_host(void* destination, size_t bytes) const {
  const Shape dims = shape();
  const DType type = dtype();
  const size_t expected = static_cast<size_t>(dims.numel()) * dtype_size(type);
  SHARDLM_CHECK(bytes == expected, "PJRT buffer ", dtype_name(type), dims.to_string(), " holds ", expected,
                " bytes; to_host was given ", bytes);
  auto args = make_args<PJRT_Buffer_ToHostBuffer_Args>();
  args.src = buffer_;
  args.dst = destination;
  args.dst_size = bytes;
  check(*plugin_, plugin_->api()->PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer");
  await_event(*plugin_, args.event, "PJRT_Buffer_ToHostBuffer (awaiting the copy)");
}

// ---- Executable ---------------------------------------------------------------------

Executable::Executable(std::shared_ptr<Plugin> plugin, PJRT_LoadedExecutable* executable)
    : plugin_(std::move(plugin)), executable_(executable) {
  // The destructor does not run for a throwing constructor: release the handle here.
  try {
    {
      ExecutableView view(*plugin_, executable_);
      auto args = make_args<PJRT_Executable_NumOutputs_Args>();
      args.executable = view.get();
      check(*plugin_, plugin_->api()->PJRT_Executable_NumOutputs(&args), "PJRT_Executable_NumOutputs");
      num_outputs_ = args.num_outputs;
    }
    auto args = make_args<PJRT_LoadedExecutable_AddressableDevices_Args>();
    args.executable = executable_;
    check(*plugin_, plugin_->api()->PJRT_LoadedExecutable_AddressableDevices(&args),
          "PJRT_LoadedExecutable_AddressableDevices");
    num_devices_ = args.num_addressable_devices;
  } catch (...) {
    destroy_loaded(*plugin_, executable_);
    throw;
  }
}

Executable::~Executable() { destroy_loaded(*plugin_, executable_); }

std::vector<std::vector<std::unique_ptr<Buffer>>> Executable::execute(
    std::span<const std::vector<PJRT_Buffer*>> arguments) {
  SHARDLM_CHECK(arguments.size() == num_devices_, "PJRT execute: the executable runs on ", num_devices_,
                " devices but was given argument lists for ", arguments.size());
  const size_t num_args = arguments.empty() ? 0 : arguments[0].size();
  std::vector<PJRT_Buffer* const*> argument_lists;
  for (size_t d = 0; d < arguments.size(); ++d) {
    SHARDLM_CHECK(arguments[d].size() == num_args, "PJRT execute: device ", d, " has ", arguments[d].size(),
                  " arguments, device 0 has ", num_args);
    argument_lists.push_back(arguments[d].data());
  }
  std::vector<std::vector<PJRT_Buffer*>> raw_outputs(num_devices_, std::vector<PJRT_Buffer*>(num_outputs_));
  std::vector<PJRT_Buffer**> output_lists;
  for (auto& list : raw_outputs) output_lists.push_back(list.data());
  std::vector<PJRT_Event*> done(num_devices_, nullptr);

  auto options = make_args<PJRT_ExecuteOptions>();
  auto args = make_args<PJRT_LoadedExecutable_Execute_Args>();
  args.executable = executable_;
  args.options = &options;
  args.argument_lists = argument_lists.data();
  args.num_devices = num_devices_;
  args.num_args = num_args;
  args.output_lists = output_lists.data();
  args.device_complete_events = done.data();
  check(*plugin_, plugin_->api()->PJRT_LoadedExecutable_Execute(&args), "PJRT_LoadedExecutable_Execute");

  // Own every output before waiting, so a failed device leaks nothing.
  std::vector<std::vector<std::unique_ptr<Buffer>>> outputs(num_devices_);
  for (size_t d = 0; d < num_devices_; ++d)
    for (PJRT_Buffer* buffer : raw_outputs[d]) outputs[d].push_back(std::make_unique<Buffer>(plugin_, buffer));
  // Execute may return before the work ends; every event is awaited and destroyed even
  // when an earlier device failed, and the first failure is the one reported.
  std::exception_ptr first_failure;
  for (PJRT_Event* event : done) {
    try {
      await_event(*plugin_, event, "PJRT_LoadedExecutable_Execute (awaiting the device)");
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
  return outputs;
}

std::string Executable::serialize() const {
  ExecutableView view(*plugin_, executable_);
  return serialize_executable(*plugin_, view.get());
}

// ---- Client -------------------------------------------------------------------------

Client::Client(std::shared_ptr<Plugin> plugin, const std::vector<NamedOption>& options) : plugin_(std::move(plugin)) {
  const PJRT_Api* api = plugin_->api();
  const std::vector<PJRT_NamedValue> values = named_values(options);
  auto create = make_args<PJRT_Client_Create_Args>();
  create.create_options = values.data();
  create.num_options = values.size();
  check(*plugin_, api->PJRT_Client_Create(&create), "PJRT_Client_Create");
  client_ = create.client;
  try {
    auto name = make_args<PJRT_Client_PlatformName_Args>();
    name.client = client_;
    check(*plugin_, api->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
    platform_name_.assign(name.platform_name, name.platform_name_size);
    auto version = make_args<PJRT_Client_PlatformVersion_Args>();
    version.client = client_;
    check(*plugin_, api->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
    platform_version_.assign(version.platform_version, version.platform_version_size);
    auto devices = make_args<PJRT_Client_AddressableDevices_Args>();
    devices.client = client_;
    check(*plugin_, api->PJRT_Client_AddressableDevices(&devices), "PJRT_Client_AddressableDevices");
    devices_.assign(devices.addressable_devices, devices.addressable_devices + devices.num_addressable_devices);
    compiled_for_ = str_cat(platform_name_, " ", platform_version_);
    if (has_slot(api, offsetof(PJRT_Api, PJRT_Client_TopologyDescription)) && describes_topologies(api)) {
      auto topology = make_args<PJRT_Client_TopologyDescription_Args>();
      topology.client = client_;
      PJRT_Error* error = api->PJRT_Client_TopologyDescription(&topology);
      if (error == nullptr)
        compiled_for_ = topology_identity(*plugin_, topology.topology);
      else
        take_error(api, error);  // a plugin may not describe its own devices: the client's names serve
    }
  } catch (...) {
    auto destroy = make_args<PJRT_Client_Destroy_Args>();
    destroy.client = client_;
    check_quietly(*plugin_, api->PJRT_Client_Destroy(&destroy), "PJRT_Client_Destroy");
    throw;
  }
}

Client::~Client() {
  auto args = make_args<PJRT_Client_Destroy_Args>();
  args.client = client_;
  check_quietly(*plugin_, plugin_->api()->PJRT_Client_Destroy(&args), "PJRT_Client_Destroy");
}

std::unique_ptr<Buffer> Client::upload(const void* data, DType dtype, const Shape& shape, int device) {
  SHARDLM_CHECK(device >= 0 && device < device_count(), "PJRT upload to device ", device, ": the ", platform_name_,
                " client has ", device_count(), " addressable devices");
  auto args = make_args<PJRT_Client_BufferFromHostBuffer_Args>();
  args.client = client_;
  args.data = data;
  args.type = buffer_type(dtype);
  args.dims = shape.dims().data();
  args.num_dims = shape.rank();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = static_cast<PJRT_Device*>(devices_[device]);
  check(*plugin_, plugin_->api()->PJRT_Client_BufferFromHostBuffer(&args), "PJRT_Client_BufferFromHostBuffer");
  auto buffer = std::make_unique<Buffer>(plugin_, args.buffer);
  // The caller may free `data` once we return, so the plugin must be done reading it.
  await_event(*plugin_, args.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer (awaiting the host copy)");
  auto ready = make_args<PJRT_Buffer_ReadyEvent_Args>();
  ready.buffer = args.buffer;
  check(*plugin_, plugin_->api()->PJRT_Buffer_ReadyEvent(&ready), "PJRT_Buffer_ReadyEvent");
  await_event(*plugin_, ready.event, "PJRT_Buffer_ReadyEvent (awaiting the upload)");
  return buffer;
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir, const std::string& compile_options) {
  const PJRT_Program program = mlir_program(mlir, compile_options);
  auto args = make_args<PJRT_Client_Compile_Args>();
  args.client = client_;
  args.program = &program;
  args.compile_options = compile_options.data();
  args.compile_options_size = compile_options.size();
  check(*plugin_, plugin_->api()->PJRT_Client_Compile(&args), "PJRT_Client_Compile");
  return std::make_unique<Executable>(plugin_, args.executable);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes) {
  SHARDLM_CHECK(!bytes.empty(), "PJRT deserialize: no bytes");
  SHARDLM_CHECK(plugin_->api()->PJRT_Executable_DeserializeAndLoad != nullptr, "PJRT plugin ", plugin_->path(),
                " cannot load serialized executables (no PJRT_Executable_DeserializeAndLoad)");
  auto args = make_args<PJRT_Executable_DeserializeAndLoad_Args>();
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  check(*plugin_, plugin_->api()->PJRT_Executable_DeserializeAndLoad(&args), "PJRT_Executable_DeserializeAndLoad");
  return std::make_unique<Executable>(plugin_, args.loaded_executable);
}

// ---- Topology -----------------------------------------------------------------------

Topology::Topology(std::shared_ptr<Plugin> plugin, const std::string& name) : plugin_(std::move(plugin)), name_(name) {
  const PJRT_Api* api = plugin_->api();
  SHARDLM_CHECK(!name.empty(), "PJRT topology: no name given (libtpu takes e.g. v5e:2x2, v4:2x2x1)");
  const bool complete = describes_topologies(api) && has_slot(api, offsetof(PJRT_Api, PJRT_TopologyDescription_Create)) &&
                        has_slot(api, offsetof(PJRT_Api, PJRT_TopologyDescription_Destroy)) &&
                        has_slot(api, offsetof(PJRT_Api, PJRT_TopologyDescription_GetDeviceDescriptions)) &&
                        has_slot(api, offsetof(PJRT_Api, PJRT_Compile));
  if (!complete)
    throw PjrtError(str_cat("PJRT plugin ", plugin_->path(), " cannot compile for a topology without its devices ",
                            "(no PJRT_TopologyDescription_Create / PJRT_Compile): drop --topology and compile on a "
                            "machine with the devices"),
                    PJRT_Error_Code_UNIMPLEMENTED);
  auto create = make_args<PJRT_TopologyDescription_Create_Args>();
  create.topology_name = name_.data();
  create.topology_name_size = name_.size();
  check(*plugin_, api->PJRT_TopologyDescription_Create(&create), "PJRT_TopologyDescription_Create");
  topology_ = create.topology;
  try {
    compiled_for_ = topology_identity(*plugin_, topology_);
    auto devices = make_args<PJRT_TopologyDescription_GetDeviceDescriptions_Args>();
    devices.topology = topology_;
    check(*plugin_, api->PJRT_TopologyDescription_GetDeviceDescriptions(&devices),
          "PJRT_TopologyDescription_GetDeviceDescriptions");
    device_count_ = static_cast<int>(devices.num_descriptions);
  } catch (...) {
    auto destroy = make_args<PJRT_TopologyDescription_Destroy_Args>();
    destroy.topology = topology_;
    check_quietly(*plugin_, api->PJRT_TopologyDescription_Destroy(&destroy), "PJRT_TopologyDescription_Destroy");
    throw;
  }
}

Topology::~Topology() {
  auto args = make_args<PJRT_TopologyDescription_Destroy_Args>();
  args.topology = topology_;
  check_quietly(*plugin_, plugin_->api()->PJRT_TopologyDescription_Destroy(&args), "PJRT_TopologyDescription_Destroy");
}

std::string Topology::compile(const std::string& mlir, const std::string& compile_options) {
  const PJRT_Program program = mlir_program(mlir, compile_options);
  auto args = make_args<PJRT_Compile_Args>();
  args.topology = topology_;
  args.program = &program;
  args.compile_options = compile_options.data();
  args.compile_options_size = compile_options.size();
  check(*plugin_, plugin_->api()->PJRT_Compile(&args), "PJRT_Compile");
  std::string bytes;
  std::exception_ptr failure;
  try {
    bytes = serialize_executable(*plugin_, args.executable);
  } catch (...) {
    failure = std::current_exception();
  }
  destroy_executable(*plugin_, args.executable);
  if (failure) std::rethrow_exception(failure);
  return bytes;
}

std::string compile_options_bytes(int partitions) {
  // Protobuf wire format, field 3 (executable_build_options, length-delimited) holding
  // varints: field 4 num_replicas, field 5 num_partitions, field 6 use_spmd_partitioning.
  // One byte per varint holds values below 128.
  SHARDLM_CHECK(partitions >= 1 && partitions < 128, "PJRT compile options: ", partitions,
                " partitions; 1 to 127 are supported");
  if (partitions == 1) return std::string("\x1a\x04\x20\x01\x28\x01", 6);
  std::string bytes("\x1a\x06\x20\x01\x28\x00\x30\x01", 8);
  bytes[5] = static_cast<char>(partitions);
  return bytes;
}

}  // namespace shardlm::backends::pjrt
