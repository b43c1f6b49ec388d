#include "backends/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include "core/error.h"

namespace shardlm::backends::cuda {
namespace {

// Set by the build: the library it found, and its soname for a moved toolkit.
constexpr const char* built_against = SHARDLM_CUBLASLT_LIBRARY;
constexpr const char* soname = SHARDLM_CUBLASLT_SONAME;

template <typename Function>
void bind(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  if (!function)
    fail("cuBLASLt (", built_against, ") has no '", name, "': install the cuBLAS of the CUDA toolkit shardlm was built with");
}

CublasLt open_library() {
  void* library = ::dlopen(built_against, RTLD_NOW | RTLD_LOCAL);
  if (!library) library = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!library)
    fail("cannot load cuBLASLt for the CUDA backend (", built_against, " or ", soname, " on the library path): ",
         ::dlerror(), "; install the CUDA toolkit's cuBLAS, or run on the CPU (--device cpu)");
  CublasLt api{};
  bind(library, "cublasLtCreate", api.create);
  bind(library, "cublasLtDestroy", api.destroy);
  bind(library, "cublasLtMatmul", api.matmul);
  bind(library, "cublasLtMatmulAlgoGetHeuristic", api.algo_get_heuristic);
  bind(library, "cublasLtMatmulDescCreate", api.desc_create);
  bind(library, "cublasLtMatmulDescDestroy", api.desc_destroy);
  bind(library, "cublasLtMatmulDescSetAttribute", api.desc_set_attribute);
  bind(library, "cublasLtMatmulPreferenceCreate", api.preference_create);
  bind(library, "cublasLtMatmulPreferenceDestroy", api.preference_destroy);
  bind(library, "cublasLtMatmulPreferenceSetAttribute", api.preference_set_attribute);
  bind(library, "cublasLtMatrixLayoutCreate", api.layout_create);
  bind(library, "cublasLtMatrixLayoutDestroy", api.layout_destroy);
  return api;  // the library stays open for the process
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt api = open_library();
  return api;
}

}  // namespace shardlm::backends::cuda
