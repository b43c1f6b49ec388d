// Tensor parallelism on the pjrt backend: one SPMD program over 2 and 4 of the XLA:CPU
// plugin's devices, weights split as each architecture's tp_plan says, against the same
// model on one device. Skipped (with the reason) where this build has no plugin.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "generation/generator.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "test_util.h"

namespace shardlm::models {
namespace {

struct SpmdRun {
  Tensor logits;                    // [prompt, vocab]
  std::vector<int64_t> greedy;      // 12 tokens after the prompt
  std::vector<int64_t> batch_last;  // the greedy tokens of a batch of 3 prompts, row by row
};

SpmdRun run_on_pjrt(const std::string& fixture, int partitions) {
  const io::ModelFiles files = io::ModelFiles::directory(testing::data_path("fixtures/" + fixture));
  const io::ModelConfig config = io::load_model_config(files);
  const io::Checkpoint checkpoint = io::Checkpoint::open(files);
  std::unique_ptr<backends::Backend> backend =
      backends::create_backend("pjrt", {.compile_cache_dir = "none", .partitions = partitions});
  std::unique_ptr<CausalLM> model =
      create_causal_lm(config, checkpoint, {.kv_cache_dtype = DType::f32, .device = backend.get()});
  generation::Generator generator(*model, *backend, {});
  const io::SafetensorsFile golden = io::SafetensorsFile::open(files.path_of("golden.safetensors"));
  const Tensor ids = golden.tensor("input_ids");
  const std::vector<int64_t> prompt(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel());
  SpmdRun run;
  generator.prepare_cache(1, static_cast<int64_t>(prompt.size()));
  run.logits = generator.forward(prompt, 0, /*all_positions=*/true);
  GenerationConfig request{.max_new_tokens = 12};
  request.eos_token_id = std::vector<int64_t>{};
  request.prefill_chunk_size = 7;
  run.greedy = generator.generate({prompt}, request).front().generated;
  const std::vector<std::vector<int64_t>> prompts{prompt, {prompt.begin(), prompt.begin() + 5}, {prompt[0]}};
  for (const generation::GenerationResult& result : generator.generate(prompts, request))
    run.batch_last.insert(run.batch_last.end(), result.generated.begin(), result.generated.end());
  return run;
}

class PjrtTensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(PjrtTensorParallel, SplitOverTwoAndFourDevicesEqualsOneDevice) {
  for (const backends::BackendInfo& info : backends::list_backends())
    if (info.name == "pjrt" && (!info.available || info.device_count < 4))
      GTEST_SKIP() << "pjrt with 4 devices is not available: " << info.detail;
  const SpmdRun whole = run_on_pjrt(GetParam(), 1);
  for (int partitions : {2, 4}) {
    const SpmdRun split = run_on_pjrt(GetParam(), partitions);
    EXPECT_LT(testing::relative_error(split.logits.data<float>(), whole.logits.data<float>(), whole.logits.numel()),
              1e-5)
        << "tp " << partitions;
    EXPECT_EQ(split.greedy, whole.greedy) << "tp " << partitions;
    EXPECT_EQ(split.batch_last, whole.batch_last) << "tp " << partitions;
  }
}

// glm4-tiny has 2 KV heads (its cache and k/v weights do not split 4 ways by head);
// qwen3-tiny ties its embedding and LM head.
INSTANTIATE_TEST_SUITE_P(EveryFixture, PjrtTensorParallel,
                         ::testing::Values("llama-tiny", "llama3-tiny", "qwen3-tiny", "qwen3-tiny-untied", "qwen3-tiny-bf16",
                                           "qwen2-tiny", "glm4-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace shardlm::models
