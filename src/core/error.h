#pragma once
// Internal code includes this; the type itself is public (include/shardlm/error.h).
#include <shardlm/error.h>

// Checks an invariant that bad *input* can break; programming errors use assert.
#define SHARDLM_CHECK(condition, ...)            \
  do {                                           \
    if (!(condition)) ::shardlm::fail(__VA_ARGS__); \
  } while (0)
