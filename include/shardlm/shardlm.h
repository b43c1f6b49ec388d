#pragma once
// The public API of shardlm. See README.md, "C++ API".

#include <shardlm/auto_model.h>
#include <shardlm/auto_tokenizer.h>
#include <shardlm/dtype.h>
#include <shardlm/error.h>
#include <shardlm/export.h>
#include <shardlm/generation_config.h>

namespace shardlm {

// Is an accelerator backend available in this build and on this machine; how many devices.
namespace accelerator {
SHARDLM_API bool is_available();
SHARDLM_API int device_count();
}  // namespace accelerator

}  // namespace shardlm
