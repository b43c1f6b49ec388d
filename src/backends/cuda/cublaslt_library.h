#pragma once
// cuBLASLt, opened when the first CUDA backend is made instead of linked: loading
// libcublasLt costs a process ~210 MB of resident memory (relocating the library),
// which every CPU run of a CUDA-enabled build would otherwise carry.

#include <cublasLt.h>

namespace shardlm::backends::cuda {

// The entry points the CUDA backend calls, as the library exports them.
struct CublasLt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set_attribute;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
};

// Opens the library on first use (the build's copy, else the loader's search path);
// throws an Error naming it and what to install when it or an entry point is missing.
const CublasLt& cublaslt();

}  // namespace shardlm::backends::cuda
