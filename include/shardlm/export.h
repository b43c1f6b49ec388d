#pragma once
// What the shared library exports: the API these headers declare. Everything else in
// it is built with hidden visibility, so internal helpers are no part of its ABI.

#define SHARDLM_API __attribute__((visibility("default")))
