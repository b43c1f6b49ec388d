#pragma once
// The part of the PJRT C ABI that pjrt_client.cpp uses, declared here so the build needs
// no XLA checkout. These are C layouts shared with a plugin compiled elsewhere: a field
// out of place is silent memory corruption, not a compile error, so every struct carries
// a size assertion on x86-64 / aarch64 (LP64).
//
// Layout reference: openxla/xla xla/pjrt/c/pjrt_c_api.h at PJRT_API_MINOR 113 (as vendored
// in zml/xla, commit 569845078f053a43af6b1519eacbcf95a032919e). Its PJRT_Api ends at
// 1144 bytes, what the CPU, CUDA and TPU plugins (0.115 - 0.117) report.
//
// Compatibility rules this relies on (minor versions only ever append):
// - Each *_Args struct starts with struct_size; a plugin reads only the fields it knows
//   and refuses a struct smaller than its minimum, so we declare each one with every
//   field of 0.113 and zero what we do not set.
// - The PJRT_Api table below stops at the last slot we call; slots we skip are `void*`
//   under their upstream names so the order can be checked against the reference.
//   0.57 rearranged the table; from then on these offsets are stable.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Opaque handles: only the plugin knows what they point to.
struct PJRT_Extension_Base;
struct PJRT_Error;
struct PJRT_Event;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Memory;
struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_Buffer;
struct PJRT_Buffer_MemoryLayout;
struct PJRT_ExecuteContext;
struct PJRT_SerializedExecutable;
struct PJRT_SendCallbackInfo;
struct PJRT_RecvCallbackInfo;
struct PJRT_MultiSlice_Config;
struct PJRT_HloOutputCallbackInfo;
struct PJRT_LoadOptions;
struct PJRT_TopologyDescription;

// absl status codes.
typedef enum {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

// Element types; the values are fixed by the ABI (XLA's PrimitiveType order differs).
// Later entries (8-bit floats, sub-byte integers, ...) are left out: we only compare
// against these and report anything else by number.
typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
} PJRT_Buffer_Type;

typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

// ---- versions, errors, named values -------------------------------------------------

struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
};

struct PJRT_Error_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Error* error;
};

struct PJRT_Error_Message_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  const char* message;  // out, lives as long as `error`
  size_t message_size;  // out
};

struct PJRT_Error_GetCode_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
};

struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // characters or list elements; 1 for a scalar
};

// ---- plugin and events --------------------------------------------------------------

struct PJRT_Plugin_Initialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
};

struct PJRT_Plugin_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* attributes;  // out, lives as long as the process
  size_t num_attributes;              // out
};

struct PJRT_Event_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
};

struct PJRT_Event_Await_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
};

// ---- client -------------------------------------------------------------------------

struct PJRT_Client_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  // Key-value store callbacks for multi-process clients; we pass none.
  void* kv_get_callback;
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};

struct PJRT_Client_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
};

struct PJRT_Client_PlatformName_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_name;  // out, owned by the client
  size_t platform_name_size;  // out
};

struct PJRT_Client_PlatformVersion_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_version;  // out, owned by the client
  size_t platform_version_size;  // out
};

struct PJRT_Client_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out, owned by the client
  size_t num_addressable_devices;           // out
};

struct PJRT_Program {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  char* code;  // not written by Compile despite the missing const
  size_t code_size;
  const char* format;  // "mlir", "hlo", "hlo_with_config"
  size_t format_size;
};

struct PJRT_Client_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
};

struct PJRT_Client_BufferFromHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // null: dense, major to minor
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // null: the device's default memory
  PJRT_Buffer_MemoryLayout* device_layout;  // null: dense, major to minor
  PJRT_Event* done_with_host_buffer;        // out
  PJRT_Buffer* buffer;                      // out
};

// ---- executables --------------------------------------------------------------------

struct PJRT_Executable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
};

struct PJRT_Executable_NumOutputs_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;  // out
};

struct PJRT_Executable_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Executable* executable;
  const char* serialized_bytes;                      // out, lives as long as serialized_executable
  size_t serialized_bytes_size;                      // out
  PJRT_SerializedExecutable* serialized_executable;  // out
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* executable);  // out, call once
};

struct PJRT_Executable_DeserializeAndLoad_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
  const char* overridden_serialized_compile_options;  // null: the serialized ones
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions* load_options;
};

struct PJRT_LoadedExecutable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
};

struct PJRT_LoadedExecutable_GetExecutable_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out, destroyed by the caller
};

struct PJRT_LoadedExecutable_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
};

struct PJRT_ExecuteOptions {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_SendCallbackInfo** send_callbacks;
  PJRT_RecvCallbackInfo** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  PJRT_MultiSlice_Config* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  PJRT_HloOutputCallbackInfo* hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
};

struct PJRT_LoadedExecutable_Execute_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;    // [num_devices][num_outputs], allocated by the caller
  PJRT_Event** device_complete_events;  // [num_devices] out, or null
  PJRT_Device* execute_device;          // null: the devices chosen at compile time
};

// ---- buffers ------------------------------------------------------------------------

struct PJRT_Buffer_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
};

struct PJRT_Buffer_ElementType_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type;  // out
};

struct PJRT_Buffer_Dimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out, lives as long as the buffer
  size_t num_dims;      // out
};

struct PJRT_Buffer_IsDeleted_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  bool is_deleted;  // out
};

struct PJRT_Buffer_ToHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // null: the buffer's own (dense) layout
  void* dst;
  size_t dst_size;
  PJRT_Event* event;  // out
};

struct PJRT_Buffer_ReadyEvent_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out
};

// ---- compiling without devices (a topology) -----------------------------------------

struct PJRT_TopologyDescription_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* topology_name;  // e.g. "v5e:2x2" for libtpu
  size_t topology_name_size;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_TopologyDescription* topology;  // out
};

struct PJRT_TopologyDescription_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
};

// PlatformName and PlatformVersion share this layout; the strings live as long as the topology.
struct PJRT_TopologyDescription_PlatformString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const char* text;  // out
  size_t text_size;  // out
};

struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  void* const* descriptions;  // out, PJRT_DeviceDescription*
  size_t num_descriptions;    // out
};

struct PJRT_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const PJRT_Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_Client* client;  // optional
  PJRT_Executable* executable;  // out: not loaded; serialize it
};

struct PJRT_Client_TopologyDescription_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_TopologyDescription* topology;  // out, owned by the client
};

// ---- the function table -------------------------------------------------------------

struct PJRT_Api {
  size_t struct_size;  // how far the plugin's table reaches
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;

  void (*PJRT_Error_Destroy)(PJRT_Error_Destroy_Args* args);
  void (*PJRT_Error_Message)(PJRT_Error_Message_Args* args);
  PJRT_Error* (*PJRT_Error_GetCode)(PJRT_Error_GetCode_Args* args);

  PJRT_Error* (*PJRT_Plugin_Initialize)(PJRT_Plugin_Initialize_Args* args);
  PJRT_Error* (*PJRT_Plugin_Attributes)(PJRT_Plugin_Attributes_Args* args);

  PJRT_Error* (*PJRT_Event_Destroy)(PJRT_Event_Destroy_Args* args);
  void* PJRT_Event_IsReady;
  void* PJRT_Event_Error;
  PJRT_Error* (*PJRT_Event_Await)(PJRT_Event_Await_Args* args);
  void* PJRT_Event_OnReady;

  PJRT_Error* (*PJRT_Client_Create)(PJRT_Client_Create_Args* args);
  PJRT_Error* (*PJRT_Client_Destroy)(PJRT_Client_Destroy_Args* args);
  PJRT_Error* (*PJRT_Client_PlatformName)(PJRT_Client_PlatformName_Args* args);
  void* PJRT_Client_ProcessIndex;
  PJRT_Error* (*PJRT_Client_PlatformVersion)(PJRT_Client_PlatformVersion_Args* args);
  void* PJRT_Client_Devices;
  PJRT_Error* (*PJRT_Client_AddressableDevices)(PJRT_Client_AddressableDevices_Args* args);
  void* PJRT_Client_LookupDevice;
  void* PJRT_Client_LookupAddressableDevice;
  void* PJRT_Client_AddressableMemories;
  PJRT_Error* (*PJRT_Client_Compile)(PJRT_Client_Compile_Args* args);
  void* PJRT_Client_DefaultDeviceAssignment;
  PJRT_Error* (*PJRT_Client_BufferFromHostBuffer)(PJRT_Client_BufferFromHostBuffer_Args* args);

  void* PJRT_DeviceDescription_Id;
  void* PJRT_DeviceDescription_ProcessIndex;
  void* PJRT_DeviceDescription_Attributes;
  void* PJRT_DeviceDescription_Kind;
  void* PJRT_DeviceDescription_DebugString;
  void* PJRT_DeviceDescription_ToString;

  void* PJRT_Device_GetDescription;
  void* PJRT_Device_IsAddressable;
  void* PJRT_Device_LocalHardwareId;
  void* PJRT_Device_AddressableMemories;
  void* PJRT_Device_DefaultMemory;
  void* PJRT_Device_MemoryStats;

  void* PJRT_Memory_Id;
  void* PJRT_Memory_Kind;
  void* PJRT_Memory_DebugString;
  void* PJRT_Memory_ToString;
  void* PJRT_Memory_AddressableByDevices;

  PJRT_Error* (*PJRT_Executable_Destroy)(PJRT_Executable_Destroy_Args* args);
  void* PJRT_Executable_Name;
  void* PJRT_Executable_NumReplicas;
  void* PJRT_Executable_NumPartitions;
  PJRT_Error* (*PJRT_Executable_NumOutputs)(PJRT_Executable_NumOutputs_Args* args);
  void* PJRT_Executable_SizeOfGeneratedCodeInBytes;
  void* PJRT_Executable_GetCostAnalysis;
  void* PJRT_Executable_OutputMemoryKinds;
  void* PJRT_Executable_OptimizedProgram;
  PJRT_Error* (*PJRT_Executable_Serialize)(PJRT_Executable_Serialize_Args* args);

  PJRT_Error* (*PJRT_LoadedExecutable_Destroy)(PJRT_LoadedExecutable_Destroy_Args* args);
  PJRT_Error* (*PJRT_LoadedExecutable_GetExecutable)(PJRT_LoadedExecutable_GetExecutable_Args* args);
  PJRT_Error* (*PJRT_LoadedExecutable_AddressableDevices)(PJRT_LoadedExecutable_AddressableDevices_Args* args);
  void* PJRT_LoadedExecutable_Delete;
  void* PJRT_LoadedExecutable_IsDeleted;
  PJRT_Error* (*PJRT_LoadedExecutable_Execute)(PJRT_LoadedExecutable_Execute_Args* args);
  PJRT_Error* (*PJRT_Executable_DeserializeAndLoad)(PJRT_Executable_DeserializeAndLoad_Args* args);
  void* PJRT_LoadedExecutable_Fingerprint;

  PJRT_Error* (*PJRT_Buffer_Destroy)(PJRT_Buffer_Destroy_Args* args);
  PJRT_Error* (*PJRT_Buffer_ElementType)(PJRT_Buffer_ElementType_Args* args);
  PJRT_Error* (*PJRT_Buffer_Dimensions)(PJRT_Buffer_Dimensions_Args* args);
  void* PJRT_Buffer_UnpaddedDimensions;
  void* PJRT_Buffer_DynamicDimensionIndices;
  void* PJRT_Buffer_GetMemoryLayout;
  void* PJRT_Buffer_OnDeviceSizeInBytes;
  void* PJRT_Buffer_Device;
  void* PJRT_Buffer_Memory;
  void* PJRT_Buffer_Delete;
  PJRT_Error* (*PJRT_Buffer_IsDeleted)(PJRT_Buffer_IsDeleted_Args* args);
  void* PJRT_Buffer_CopyToDevice;
  PJRT_Error* (*PJRT_Buffer_ToHostBuffer)(PJRT_Buffer_ToHostBuffer_Args* args);
  void* PJRT_Buffer_IsOnCpu;
  PJRT_Error* (*PJRT_Buffer_ReadyEvent)(PJRT_Buffer_ReadyEvent_Args* args);
  // The slots above are what a client needs (Plugin::load checks the table reaches them);
  // those below only compiling for a topology without devices, checked when asked for.
  void* PJRT_Buffer_UnsafePointer;
  void* PJRT_Buffer_IncreaseExternalReferenceCount;
  void* PJRT_Buffer_DecreaseExternalReferenceCount;
  void* PJRT_Buffer_OpaqueDeviceMemoryDataPointer;

  void* PJRT_CopyToDeviceStream_Destroy;
  void* PJRT_CopyToDeviceStream_AddChunk;
  void* PJRT_CopyToDeviceStream_TotalBytes;
  void* PJRT_CopyToDeviceStream_GranuleSize;
  void* PJRT_CopyToDeviceStream_CurrentBytes;

  PJRT_Error* (*PJRT_TopologyDescription_Create)(PJRT_TopologyDescription_Create_Args* args);
  PJRT_Error* (*PJRT_TopologyDescription_Destroy)(PJRT_TopologyDescription_Destroy_Args* args);
  PJRT_Error* (*PJRT_TopologyDescription_PlatformName)(PJRT_TopologyDescription_PlatformString_Args* args);
  PJRT_Error* (*PJRT_TopologyDescription_PlatformVersion)(PJRT_TopologyDescription_PlatformString_Args* args);
  PJRT_Error* (*PJRT_TopologyDescription_GetDeviceDescriptions)(
      PJRT_TopologyDescription_GetDeviceDescriptions_Args* args);
  void* PJRT_TopologyDescription_Serialize;
  void* PJRT_TopologyDescription_Attributes;

  PJRT_Error* (*PJRT_Compile)(PJRT_Compile_Args* args);

  void* PJRT_Executable_OutputElementTypes;
  void* PJRT_Executable_OutputDimensions;
  void* PJRT_Buffer_CopyToMemory;
  void* PJRT_Client_CreateViewOfDeviceBuffer;
  void* PJRT_Executable_Fingerprint;
  PJRT_Error* (*PJRT_Client_TopologyDescription)(PJRT_Client_TopologyDescription_Args* args);
  // Upstream continues (PJRT_Executable_GetCompiledMemoryStats, ...); nothing past here is called.
};

// The plugin's one exported symbol.
typedef const PJRT_Api* (*PJRT_GetPjrtApi_Fn)(void);

#ifdef __cplusplus
}  // extern "C"

// Sizes worked out field by field from the 0.113 reference. The two the plugins state in
// their errors ("expected 88", "expected 112") are their minimums: ours must not be smaller.
static_assert(sizeof(void*) == 8, "pjrt_abi.h describes the LP64 layout");
static_assert(sizeof(PJRT_Buffer_Type) == 4 && sizeof(PJRT_Error_Code) == 4, "C enums are int-sized");
static_assert(sizeof(PJRT_Api_Version) == 24);
static_assert(sizeof(PJRT_Error_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Error_Message_Args) == 40);
static_assert(sizeof(PJRT_Error_GetCode_Args) == 32);
static_assert(sizeof(PJRT_NamedValue) == 56);
static_assert(sizeof(PJRT_Plugin_Initialize_Args) == 16);
static_assert(sizeof(PJRT_Plugin_Attributes_Args) == 32);
static_assert(sizeof(PJRT_Event_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Event_Await_Args) == 24);
static_assert(sizeof(PJRT_Client_Create_Args) == 88);
static_assert(sizeof(PJRT_Client_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Client_PlatformName_Args) == 40);
static_assert(sizeof(PJRT_Client_PlatformVersion_Args) == 40);
static_assert(sizeof(PJRT_Client_AddressableDevices_Args) == 40);
static_assert(sizeof(PJRT_Program) == 48);
static_assert(sizeof(PJRT_Client_Compile_Args) == 56);
static_assert(sizeof(PJRT_Client_BufferFromHostBuffer_Args) == 120);
static_assert(sizeof(PJRT_Executable_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Executable_NumOutputs_Args) == 32);
static_assert(sizeof(PJRT_Executable_Serialize_Args) == 56);
static_assert(sizeof(PJRT_Executable_DeserializeAndLoad_Args) == 72);
static_assert(sizeof(PJRT_LoadedExecutable_Destroy_Args) == 24);
static_assert(sizeof(PJRT_LoadedExecutable_GetExecutable_Args) == 32);
static_assert(sizeof(PJRT_LoadedExecutable_AddressableDevices_Args) == 40);
static_assert(sizeof(PJRT_ExecuteOptions) == 144 && offsetof(PJRT_ExecuteOptions, multi_slice_config) == 112);
static_assert(sizeof(PJRT_LoadedExecutable_Execute_Args) == 80);
static_assert(sizeof(PJRT_Buffer_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Buffer_ElementType_Args) == 32);
static_assert(sizeof(PJRT_Buffer_Dimensions_Args) == 40);
static_assert(sizeof(PJRT_Buffer_IsDeleted_Args) == 32);
static_assert(sizeof(PJRT_Buffer_ToHostBuffer_Args) == 56);
static_assert(sizeof(PJRT_Buffer_ReadyEvent_Args) == 32);
// Table slots: 40 bytes of header, then one pointer each in upstream order.
static_assert(offsetof(PJRT_Api, PJRT_Error_Destroy) == 40);
static_assert(offsetof(PJRT_Api, PJRT_Client_Create) == 40 + 8 * 10);
static_assert(offsetof(PJRT_Api, PJRT_Client_BufferFromHostBuffer) == 40 + 8 * 22);
static_assert(offsetof(PJRT_Api, PJRT_Executable_Destroy) == 40 + 8 * 40);
static_assert(offsetof(PJRT_Api, PJRT_LoadedExecutable_Destroy) == 40 + 8 * 50);
static_assert(offsetof(PJRT_Api, PJRT_Executable_DeserializeAndLoad) == 40 + 8 * 56);
static_assert(offsetof(PJRT_Api, PJRT_Buffer_Destroy) == 40 + 8 * 58);
static_assert(offsetof(PJRT_Api, PJRT_Buffer_ReadyEvent) == 40 + 8 * 72);
static_assert(offsetof(PJRT_Api, PJRT_TopologyDescription_Create) == 40 + 8 * 82);
static_assert(offsetof(PJRT_Api, PJRT_Compile) == 40 + 8 * 89);
static_assert(offsetof(PJRT_Api, PJRT_Client_TopologyDescription) == 40 + 8 * 95);
static_assert(sizeof(PJRT_Api) == 40 + 8 * 96);
static_assert(sizeof(PJRT_TopologyDescription_Create_Args) == 56);
static_assert(sizeof(PJRT_TopologyDescription_Destroy_Args) == 24);
static_assert(sizeof(PJRT_TopologyDescription_PlatformString_Args) == 40);
static_assert(sizeof(PJRT_TopologyDescription_GetDeviceDescriptions_Args) == 40);
static_assert(sizeof(PJRT_Compile_Args) == 64);
static_assert(sizeof(PJRT_Client_TopologyDescription_Args) == 32);
#endif
