// The static KV cache's layout: every layer's keys and values are views of one
// allocation, laid end to end, so that a cache of 2 MB or more lies in huge pages on the
// CPU however small each layer's part is.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/backend.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"

namespace shardlm::models {
namespace {

TEST(KvCache, LayersAreConsecutiveViewsOfOneHugePageAlignedAllocation) {
  io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/qwen3-tiny"));
  const io::ModelConfig config = io::load_model_config(files);
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  std::unique_ptr<CausalLM> model = create_causal_lm(config, checkpoint, {});
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  const int64_t batch = 2, positions = 1024;  // each layer's keys well under 2 MB, the whole cache over
  const StaticCache cache = model->allocate_cache(*backend, batch, positions);
  ASSERT_EQ(cache.layers.size(), static_cast<size_t>(config.num_hidden_layers));
  const Shape shape{batch, config.num_key_value_heads, positions, config.head_dim};
  const size_t part_bytes = static_cast<size_t>(shape.numel()) * dtype_size(cache.layers[0].keys.dtype());
  ASSERT_LT(part_bytes, Tensor::huge_page_bytes);
  ASSERT_GE(cache.bytes(), Tensor::huge_page_bytes);
  const auto address = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()); };
  EXPECT_EQ(address(cache.layers[0].keys) % Tensor::huge_page_bytes, 0u);
  uintptr_t next = address(cache.layers[0].keys);
  for (const LayerCache& layer : cache.layers) {
    EXPECT_EQ(layer.keys.shape(), shape);
    EXPECT_EQ(layer.values.shape(), shape);
    EXPECT_EQ(address(layer.keys), next);
    EXPECT_EQ(address(layer.values), next + part_bytes);  // part_bytes is a whole number of cache lines here
    next += 2 * part_bytes;
  }
  EXPECT_EQ(cache.bytes(), 2 * part_bytes * cache.layers.size());
}

}  // namespace
}  // namespace shardlm::models
