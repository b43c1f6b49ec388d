// tp_plan parsing and matching (transformers' rules), and how dimensions split.
#include <gtest/gtest.h>

#include "parallel/sharding.h"
#include "parallel/tp_plan.h"
#include "test_util.h"

namespace shardlm::parallel {
namespace {

using testing::error_of;

TEST(TpPlan, MatchesExactNameThenModuleThenLayerWildcard) {
  TpPlan plan({{"model.layers.*.self_attn.q_proj", "colwise"},
               {"model.layers.1.self_attn.q_proj", "replicate"},
               {"model.layers.2.self_attn.q_proj.weight", "rowwise"},
               {"lm_head", "colwise_rep"}},
              "test");
  EXPECT_EQ(plan.style_for("model.layers.0.self_attn.q_proj.weight"), ShardStyle::colwise);
  EXPECT_EQ(plan.style_for("model.layers.17.self_attn.q_proj.bias"), ShardStyle::colwise);
  EXPECT_EQ(plan.style_for("model.layers.1.self_attn.q_proj.weight"), ShardStyle::replicate);
  EXPECT_EQ(plan.style_for("model.layers.2.self_attn.q_proj.weight"), ShardStyle::rowwise);
  EXPECT_EQ(plan.style_for("lm_head.weight"), ShardStyle::colwise_gather_output);
  EXPECT_EQ(plan.style_for("model.layers.0.self_attn.k_proj.weight"), std::nullopt);
  EXPECT_EQ(plan.style_for("model.norm.weight"), std::nullopt);
}

TEST(TpPlan, AcceptsBaseModelKeysWithoutTheModelPrefix) {
  TpPlan plan({{"layers.*.mlp.down_proj", "rowwise"}}, "test");
  EXPECT_EQ(plan.style_for("model.layers.4.mlp.down_proj.weight"), ShardStyle::rowwise);
  EXPECT_TRUE(plan.unmatched_rules().empty());
}

TEST(TpPlan, AliasesMapToTheirStyles) {
  EXPECT_EQ(parse_shard_style("colwise_rep", "x"), ShardStyle::colwise_gather_output);
  EXPECT_EQ(parse_shard_style("rowwise_rep", "x"), ShardStyle::rowwise_split_input);
  EXPECT_EQ(parse_shard_style("replicated_with_grad_allreduce", "x"), ShardStyle::replicate);
  EXPECT_EQ(parse_shard_style("packed_rowwise", "x"), ShardStyle::packed_rowwise);
}

TEST(TpPlan, UnknownStyleListsTheValidOnes) {
  const std::string message = error_of([] { TpPlan({{"model.layers.*.mlp.up_proj", "columnwise"}}, "plan.json"); });
  EXPECT_NE(message.find("plan.json key 'model.layers.*.mlp.up_proj'"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown tensor-parallel style 'columnwise'"), std::string::npos) << message;
  for (const std::string& name : shard_style_names()) EXPECT_NE(message.find(name), std::string::npos) << name;
}

TEST(TpPlan, JsonErrorsNameTheFile) {
  EXPECT_NE(error_of([] { TpPlan::from_json_text("[1, 2]", "p.json"); }).find("p.json: a tp_plan must be a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([] { TpPlan::from_json_text("{\"lm_head\": 3}", "p.json"); }).find("'lm_head' must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([] { TpPlan::from_json_text("{", "p.json"); }).find("p.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { TpPlan::from_json_file("/nonexistent/plan.json"); }).find("/nonexistent/plan.json"),
            std::string::npos);
}

TEST(TpPlan, OverridesReplaceRulesOneByOne) {
  TpPlan defaults({{"model.layers.*.self_attn.q_proj", "colwise"}, {"model.layers.*.mlp.up_proj", "colwise"}}, "d");
  TpPlan merged = defaults.overridden_by(TpPlan({{"model.layers.*.self_attn.q_proj", "replicate"}}, "u"));
  EXPECT_EQ(merged.style_for("model.layers.3.self_attn.q_proj.weight"), ShardStyle::replicate);
  EXPECT_EQ(merged.style_for("model.layers.3.mlp.up_proj.weight"), ShardStyle::colwise);
}

TEST(TpPlan, ReportsRulesThatMatchedNothing) {
  TpPlan plan({{"model.layers.*.mlp.up_proj", "colwise"}, {"model.layers.*.mlp.upproj", "colwise"}}, "u");
  plan.style_for("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(plan.unmatched_rules(), std::vector<std::string>{"model.layers.*.mlp.upproj"});
}

TEST(TpPlan, GenericNameStarsEveryNumber) {
  EXPECT_EQ(generic_name("model.layers.12.mlp.experts.3.w1"), "model.layers.*.mlp.experts.*.w*");
}

TEST(Sharding, EvenSplitGivesTheFirstRanksTheRemainder) {
  EXPECT_EQ(even_split(10, 1, 0, 4).ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}}));
  EXPECT_EQ(even_split(10, 1, 1, 4).ranges, (std::vector<std::pair<int64_t, int64_t>>{{3, 6}}));
  EXPECT_EQ(even_split(10, 1, 3, 4).ranges, (std::vector<std::pair<int64_t, int64_t>>{{8, 10}}));
  EXPECT_EQ(even_split(8, 16, 1, 4).ranges, (std::vector<std::pair<int64_t, int64_t>>{{32, 64}}));
  EXPECT_EQ(even_split_sizes(10, 1, 4), (std::vector<int64_t>{3, 3, 2, 2}));
}

TEST(Sharding, PackedSplitTakesMatchingRowsOfEachPart) {
  EXPECT_EQ(packed_split(2, 160, 1, 1, 4).ranges, (std::vector<std::pair<int64_t, int64_t>>{{40, 80}, {200, 240}}));
}

TEST(Sharding, KvHeadsFollowTheQueryHeadsOfTheRank) {
  // 8 query heads on 2 KV heads (groups of 4): tp 2 gives each rank one KV head.
  EXPECT_EQ(kv_heads_for_query_heads(4, 4, 8, 2), (std::vector<int64_t>{1}));
  // tp 4 > 2 KV heads: ranks 0 and 1 both compute KV head 0.
  EXPECT_EQ(kv_heads_for_query_heads(0, 2, 8, 2), (std::vector<int64_t>{0}));
  EXPECT_EQ(kv_heads_for_query_heads(2, 2, 8, 2), (std::vector<int64_t>{0}));
  EXPECT_EQ(kv_heads_for_query_heads(6, 2, 8, 2), (std::vector<int64_t>{1}));
  // 8 KV heads over tp 2: four each, one query head per KV head.
  EXPECT_EQ(kv_heads_for_query_heads(4, 4, 8, 8), (std::vector<int64_t>{4, 5, 6, 7}));
  // 12 heads on 3 KV heads (groups of 4) over tp 4: rank 1 holds heads 3..5, which read
  // KV heads 0, 1, 1; runs cut to length 1 keep j -> j / (3 / 3).
  EXPECT_EQ(kv_heads_for_query_heads(3, 3, 12, 3), (std::vector<int64_t>{0, 1, 1}));
  // Heads 2..7 of 8 on KV groups of 4: runs of 2 and 4 cut to 2.
  EXPECT_EQ(kv_heads_for_query_heads(2, 6, 8, 2), (std::vector<int64_t>{0, 1, 1}));
}

}  // namespace
}  // namespace shardlm::parallel
