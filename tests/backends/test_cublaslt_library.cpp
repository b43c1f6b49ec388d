// The CUDA backend opens cuBLASLt at run time: every entry point it calls must bind,
// whether or not this machine has a GPU (descriptors are host objects).
#include <gtest/gtest.h>

#include "backends/cuda/cublaslt_library.h"

namespace shardlm::backends::cuda {
namespace {

TEST(CublasLtLibrary, OpensAndBindsEveryEntryPoint) {
  const CublasLt& api = cublaslt();
  for (const void* entry : {reinterpret_cast<const void*>(api.create), reinterpret_cast<const void*>(api.destroy),
                            reinterpret_cast<const void*>(api.matmul),
                            reinterpret_cast<const void*>(api.algo_get_heuristic),
                            reinterpret_cast<const void*>(api.desc_create),
                            reinterpret_cast<const void*>(api.desc_destroy),
                            reinterpret_cast<const void*>(api.desc_set_attribute),
                            reinterpret_cast<const void*>(api.preference_create),
                            reinterpret_cast<const void*>(api.preference_destroy),
                            reinterpret_cast<const void*>(api.preference_set_attribute),
                            reinterpret_cast<const void*>(api.layout_create),
                            reinterpret_cast<const void*>(api.layout_destroy)})
    EXPECT_NE(entry, nullptr);
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(api.layout_create(&layout, CUDA_R_32F, 64, 16, 64), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api.layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace shardlm::backends::cuda
