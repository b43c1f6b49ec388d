// Tensor parallelism across processes. Run by CTest under mpirun with 2 and 4 ranks
// (tests/parallel/CMakeLists.txt); every rank runs every test, and each also loads the
// whole model alone (tp_size 1) as the reference its shard of the job must reproduce.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <shardlm/auto_model.h>

#include "core/logging.h"
#include "io/model_files.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "io/config.h"
#include "parallel/process_group.h"
#include "test_util.h"

namespace shardlm {
namespace {

using testing::data_path;

parallel::ProcessGroup& world() { return *parallel::world_process_group(); }

PretrainedOptions sharded_options(std::map<std::string, std::string> plan = {}) {
  PretrainedOptions options;
  options.threads = 1;
  options.distributed_config = DistributedConfig{.tp_size = world().size(), .tp_plan = std::move(plan)};
  return options;
}

// The error every rank gets from `action`: a JobError, agreed across ranks.
template <typename Action>
std::string job_error_of(Action action) {
  return testing::error_of<JobError>(action);
}

TEST(Collectives, SumGatherBroadcastAndAgreeOnFailures) {
  const int rank = world().rank(), size = world().size();
  Tensor values = Tensor::from_f32(std::vector<float>{1.0f * rank, 2.0f, -0.5f}, {3});
  world().all_reduce_sum(values);
  const float rank_sum = size * (size - 1) / 2.0f;
  EXPECT_EQ(std::vector<float>(values.data<float>(), values.data<float>() + 3),
            (std::vector<float>{rank_sum, 2.0f * size, -0.5f * size}));

  // Rank r holds r + 1 columns of 2 rows, filled with 100 * row + r.
  std::vector<int64_t> counts;
  for (int r = 0; r < size; ++r) counts.push_back(r + 1);
  std::vector<float> mine;
  for (int row = 0; row < 2; ++row)
    for (int c = 0; c <= rank; ++c) mine.push_back(100.0f * row + rank);
  Tensor local = Tensor::from_f32(mine, {2, rank + 1});
  const int64_t total = size * (size + 1) / 2;
  Tensor gathered = Tensor::zeros({2, total}, DType::f32);
  world().all_gather_columns(local, gathered, counts);
  int64_t column = 0;
  for (int r = 0; r < size; ++r)
    for (int c = 0; c <= r; ++c, ++column)
      for (int row = 0; row < 2; ++row)
        EXPECT_EQ(gathered.data<float>()[row * total + column], 100.0f * row + r) << "rank " << r << " row " << row;

  Tensor seed = Tensor::from_i32(std::vector<int32_t>{rank == size - 1 ? 77 : 0}, {1});
  world().broadcast(seed, size - 1);
  EXPECT_EQ(seed.data<int32_t>()[0], 77);

  EXPECT_EQ(world().first_failure(std::nullopt), std::nullopt);
  std::optional<std::string> failure = rank >= 1 ? std::optional<std::string>(str_cat("disk ", rank)) : std::nullopt;
  // The failing rank is named with its host, which every rank knows.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(world().host_of(rank), std::string(host));
  EXPECT_EQ(world().first_failure(failure), std::optional<std::string>(str_cat("rank 1 (", world().host_of(1), "): disk 1")));
}

struct ModelCase {
  std::string name, path;
  std::map<std::string, std::string> plan{};
};

void PrintTo(const ModelCase& model, std::ostream* out) { *out << model.name; }

class ShardedModel : public ::testing::TestWithParam<ModelCase> {};

// Logits of every position and the greedy continuation equal those of the whole model.
TEST_P(ShardedModel, MatchesTheWholeModel) {
  const ModelCase& model_case = GetParam();
  PretrainedOptions alone;
  alone.threads = 1;
  AutoModelForCausalLM whole = AutoModelForCausalLM::from_pretrained(model_case.path, alone);
  AutoModelForCausalLM sharded = AutoModelForCausalLM::from_pretrained(model_case.path, sharded_options(model_case.plan));
  ASSERT_EQ(sharded.tp_size(), world().size());
  ASSERT_EQ(sharded.tp_rank(), world().rank());
  EXPECT_LT(sharded.weight_bytes(), whole.weight_bytes());

  const int64_t vocab = static_cast<int64_t>(whole.logits({1}).front().size());
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < 19; ++i) prompt.push_back((i * 37 + 11) % vocab);
  const std::vector<std::vector<float>> expected = whole.logits(prompt), actual = sharded.logits(prompt);
  ASSERT_EQ(actual.size(), expected.size());
  double worst = 0;
  for (size_t p = 0; p < expected.size(); ++p)
    worst = std::max(worst, testing::relative_error(actual[p].data(), expected[p].data(), expected[p].size()));
  EXPECT_LT(worst, 1e-5) << model_case.name << " at tp_size " << world().size();

  GenerationConfig greedy;
  greedy.do_sample = false;
  greedy.max_new_tokens = 24;
  BatchEncoding inputs;
  inputs.input_ids = {prompt};
  EXPECT_EQ(sharded.generate(inputs, greedy), whole.generate(inputs, greedy));
  GenerationConfig eager = greedy;
  eager.disable_compile = true;
  EXPECT_EQ(sharded.generate(inputs, eager), whole.generate(inputs, greedy));
  if (world().rank() == 0)
    std::cout << model_case.name << " tp_size " << world().size() << ": max relative logit error " << worst
              << ", weight bytes " << sharded.weight_bytes() << " of " << whole.weight_bytes() << "\n";
}

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> cases;
  for (const char* name : {"qwen3-tiny", "qwen3-tiny-untied", "llama3-tiny", "qwen2-tiny", "glm4-tiny", "llama-tiny",
                           "gemma3-tiny"})
    cases.push_back({name, data_path(str_cat("fixtures/", name))});
  cases.push_back({"stories260K", "embedded:stories260K"});
  // transformers' workaround for KV heads that do not divide tp_size: attention replicated.
  cases.push_back({"glm4-tiny-replicated-attention",
                   data_path("fixtures/glm4-tiny"),
                   {{"model.layers.*.self_attn.q_proj", "replicate"},
                    {"model.layers.*.self_attn.k_proj", "replicate"},
                    {"model.layers.*.self_attn.v_proj", "replicate"},
                    {"model.layers.*.self_attn.o_proj", "replicate"}}});
  // Whole MLP activations, split again by the down projection; a gathered LM head input.
  cases.push_back({"llama-tiny-rowwise-split-input",
                   data_path("fixtures/llama-tiny"),
                   {{"model.layers.*.mlp.gate_proj", "colwise_rep"},
                    {"model.layers.*.mlp.up_proj", "colwise_gather_output"},
                    {"model.layers.*.mlp.down_proj", "rowwise_rep"},
                    {"model.embed_tokens", "replicate"},
                    {"lm_head", "colwise"}}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryArchitecture, ShardedModel, ::testing::ValuesIn(model_cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Bytes a rank holds: the split weights' share plus every replicated weight. llama-tiny's
// dimensions (4 KV heads, 176 intermediate, 1024 vocab) divide by 2 and 4, so exactly.
TEST(ShardedLoading, EachRankHoldsItsShareOfSplitWeightsAndAllReplicatedOnes) {
  const std::string path = data_path("fixtures/llama-tiny");
  AutoModelForCausalLM sharded = AutoModelForCausalLM::from_pretrained(path, sharded_options());
  io::ModelFiles files = io::ModelFiles::directory(path);
  io::Checkpoint checkpoint = io::Checkpoint::open(files);
  const parallel::TpPlan plan = models::default_tp_plan(io::load_model_config(files));
  size_t split_bytes = 0, replicated_bytes = 0;
  for (const std::string& name : checkpoint.names()) {
    const size_t bytes = checkpoint.tensor(name).nbytes();
    const bool split = plan.style_for(name).value_or(parallel::ShardStyle::replicate) != parallel::ShardStyle::replicate;
    (split ? split_bytes : replicated_bytes) += bytes;
  }
  EXPECT_GT(split_bytes, 0u);
  EXPECT_EQ(sharded.weight_bytes(), split_bytes / world().size() + replicated_bytes);
}

TEST(Errors, TpSizeMustEqualTheProcessCount) {
  PretrainedOptions options;
  options.distributed_config = DistributedConfig{.tp_size = world().size() + 1};
  const std::string message =
      job_error_of([&] { AutoModelForCausalLM::from_pretrained(data_path("fixtures/llama-tiny"), options); });
  EXPECT_NE(message.find(str_cat("tp_size is ", world().size() + 1, " but this job has ", world().size())),
            std::string::npos)
      << message;
}

// A file missing on one host: every rank fails with that rank's message, promptly.
TEST(Errors, OneRankFailingToLoadFailsEveryRank) {
  const int failing = world().size() - 1;
  std::string path = data_path("fixtures/qwen3-tiny");
  if (world().rank() == failing) {
    const auto broken = std::filesystem::temp_directory_path() / str_cat("shardlm-tp-broken-", ::getpid());
    std::filesystem::create_directories(broken);
    std::filesystem::copy_file(std::filesystem::path(path) / "config.json", broken / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    path = broken.string();
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string message = job_error_of([&] { AutoModelForCausalLM::from_pretrained(path, sharded_options()); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(message.find(str_cat(world().describe_rank(failing), ": ")), std::string::npos) << message;
  EXPECT_NE(message.find("safetensors"), std::string::npos) << message;
  EXPECT_LT(seconds, 10.0);
}

TEST(Errors, PlansThatCannotApplyFailOnEveryRank) {
  const std::string path = data_path("fixtures/qwen3-tiny");
  std::string message = job_error_of([&] {
    AutoModelForCausalLM::from_pretrained(path, sharded_options({{"model.norm", "colwise"}}));
  });
  EXPECT_NE(message.find("'model.norm.weight'"), std::string::npos) << message;
  message = job_error_of([&] {
    AutoModelForCausalLM::from_pretrained(path, sharded_options({{"model.layers.*.self_attn.k_proj", "replicate"}}));
  });
  EXPECT_NE(message.find("splits the heads of only some"), std::string::npos) << message;
  message = job_error_of([&] {
    AutoModelForCausalLM::from_pretrained(path, sharded_options({{"lm_head", "embedding_rowwise"}}));
  });
  EXPECT_NE(message.find("applies only to embeddings"), std::string::npos) << message;
  message = job_error_of([&] {
    AutoModelForCausalLM::from_pretrained(path, sharded_options({{"model.layers.*.mlp.up_proj", "sideways"}}));
  });
  EXPECT_NE(message.find("unknown tensor-parallel style 'sideways'"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardlm
