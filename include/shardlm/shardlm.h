#pragma once
// The public API of shardlm. See README.md, "C++ API".

#include <shardlm/auto_model.h>
#include <shardlm/auto_tokenizer.h>
#include <shardlm/dtype.h>
#include <shardlm/error.h>
#include <shardlm/generation_config.h>

namespace shardlm {

// Is an accelerator backend available in this build and on this machine; how many devices.
namespace accelerator {
bool is_available();
int device_count();
}  // namespace accelerator

}  // namespace shardlm
