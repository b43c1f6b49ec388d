// A PJRT plugin that is wrong in one way, chosen at build time by FAKE_PJRT_FLAW, so the
// client's refusals can be tested without a broken plugin from elsewhere:
//   1  speaks PJRT API 1.0 (a major version shardlm does not speak)
//   2  speaks PJRT API 0.40 (older than the table layout shardlm reads)
//   3  its function table ends before PJRT_Buffer_ReadyEvent
//   4  a complete table whose PJRT_Client_Create fails, as libtpu does without a TPU
// Every slot the client checks for is filled; each call but the error accessors fails.

#include <cstddef>
#include <string>

#include "backends/pjrt/pjrt_abi.h"

struct PJRT_Error {
  std::string message;
  PJRT_Error_Code code;
};

namespace {

PJRT_Error* fails(PJRT_Error_Code code, const char* message) { return new PJRT_Error{message, code}; }

template <class Args>
PJRT_Error* unimplemented(Args*) {
  return fails(PJRT_Error_Code_UNIMPLEMENTED, "the fake plugin implements nothing");
}

void destroy_error(PJRT_Error_Destroy_Args* args) { delete args->error; }

void error_message(PJRT_Error_Message_Args* args) {
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* error_code(PJRT_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return nullptr;
}

PJRT_Error* initialize(PJRT_Plugin_Initialize_Args*) { return nullptr; }

PJRT_Error* create_client(PJRT_Client_Create_Args*) {
  return fails(PJRT_Error_Code_NOT_FOUND, "fake plugin: no device found (as libtpu says without a TPU)");
}

PJRT_Api make_api() {
  PJRT_Api api{};
  api.struct_size = sizeof(PJRT_Api);
  api.pjrt_api_version = {sizeof(PJRT_Api_Version), nullptr, 0, 113};
  api.PJRT_Error_Destroy = destroy_error;
  api.PJRT_Error_Message = error_message;
  api.PJRT_Error_GetCode = error_code;
  api.PJRT_Plugin_Initialize = initialize;
  api.PJRT_Event_Destroy = unimplemented;
  api.PJRT_Event_Await = unimplemented;
  api.PJRT_Client_Create = create_client;
  api.PJRT_Client_Destroy = unimplemented;
  api.PJRT_Client_PlatformName = unimplemented;
  api.PJRT_Client_PlatformVersion = unimplemented;
  api.PJRT_Client_AddressableDevices = unimplemented;
  api.PJRT_Client_Compile = unimplemented;
  api.PJRT_Client_BufferFromHostBuffer = unimplemented;
  api.PJRT_Executable_Destroy = unimplemented;
  api.PJRT_Executable_NumOutputs = unimplemented;
  api.PJRT_LoadedExecutable_Destroy = unimplemented;
  api.PJRT_LoadedExecutable_GetExecutable = unimplemented;
  api.PJRT_LoadedExecutable_AddressableDevices = unimplemented;
  api.PJRT_LoadedExecutable_Execute = unimplemented;
  api.PJRT_Buffer_Destroy = unimplemented;
  api.PJRT_Buffer_ElementType = unimplemented;
  api.PJRT_Buffer_Dimensions = unimplemented;
  api.PJRT_Buffer_IsDeleted = unimplemented;
  api.PJRT_Buffer_ToHostBuffer = unimplemented;
  api.PJRT_Buffer_ReadyEvent = unimplemented;
#if FAKE_PJRT_FLAW == 1
  api.pjrt_api_version.major_version = 1;
  api.pjrt_api_version.minor_version = 0;
#elif FAKE_PJRT_FLAW == 2
  api.pjrt_api_version.minor_version = 40;
#elif FAKE_PJRT_FLAW == 3
  api.struct_size = offsetof(PJRT_Api, PJRT_Buffer_ReadyEvent);
#endif
  return api;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static const PJRT_Api api = make_api();
  return &api;
}
