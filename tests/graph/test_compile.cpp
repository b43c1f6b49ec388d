// graph::compile on a hand-built graph: each fusion fires, the arena reuses memory,
// and the compiled result equals eager execution of the same calls.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "graph/builder.h"
#include "graph/compile.h"
#include "graph/ops.h"
#include "test_util.h"

namespace shardlm::graph {
namespace {

struct Weights {
  std::mt19937 random{5};
  Tensor x = testing::random_tensor({4, 16}, DType::f32, random);
  Tensor norm = testing::random_tensor({16}, DType::f32, random);
  Tensor gate = testing::random_tensor({24, 16}, DType::bf16, random, 0.3f);
  Tensor up = testing::random_tensor({24, 16}, DType::bf16, random, 0.3f);
  Tensor down = testing::random_tensor({16, 24}, DType::f32, random, 0.3f);
  Tensor query = testing::random_tensor({16, 16}, DType::f32, random, 0.3f);
  Tensor key = testing::random_tensor({16, 16}, DType::bf16, random, 0.3f);
  Tensor head = testing::random_tensor({8, 16}, DType::f32, random, 0.3f);
  Tensor positions = Tensor::from_i32(std::vector<int32_t>{0, 1, 2, -1}, {4});
  backends::RotaryEmbedding rotary{.inv_freq = {1.0, 0.01}, .rotary_dim = 4, .interleaved = false};
};

// A pre-norm MLP block, a rotated projection and a normed head: the patterns every model has.
Value record_block(Builder& b, const Weights& w) {
  Value x = b.bind(w.x);
  Value normed = b.rms_norm(x, b.bind(w.norm), 1e-6);
  Value mlp = b.silu_mul(b.linear(normed, b.bind(w.gate)), b.linear(normed, b.bind(w.up)));
  Value y = b.add(x, b.linear(mlp, b.bind(w.down)));                     // -> linear_residual
  Value q = b.reshape(b.linear(x, b.bind(w.query)), {4, 2, 8});  // with k's: -> sibling_linears
  Value k = b.reshape(b.linear(x, b.bind(w.key)), {4, 2, 8});
  Value rotated = b.reshape(b.rope(q, b.bind(w.positions), w.rotary), {4, 16});  // -> in-place rope
  Value rotated_key = b.reshape(b.rope(k, b.bind(w.positions), w.rotary), {4, 16});  // -> in-place rope
  Value z = b.add(b.add(y, rotated), rotated_key);
  return b.linear(b.rms_norm(z, b.bind(w.norm), 1e-6), b.bind(w.head));  // -> rms_norm_linear
}

TEST(Compile, FusesPlansAndMatchesEager) {
  Weights weights;
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  Builder eager(*backend, BuildMode::eager);
  const Tensor& expected = eager.tensor(record_block(eager, weights));

  Builder recorder(*backend, BuildMode::record);
  Value output = record_block(recorder, weights);
  Graph graph = recorder.take_graph();
  size_t activation_bytes = 0;
  for (const ValueInfo& value : graph.values)
    if (!value.bound && value.alias_of < 0) activation_bytes += value.shape.numel() * sizeof(float);
  Executable executable = compile(graph, output, *backend, {});
  // gated_linear, linear_residual, sibling_linears, rms_norm_linear, two in-place ropes
  EXPECT_EQ(executable.fused_count(), 6u);
  EXPECT_LT(executable.arena_bytes(), activation_bytes);
  executable.run(*backend);
  const Tensor& actual = executable.tensor(output);
  EXPECT_LT(testing::relative_error(actual.data<float>(), expected.data<float>(), expected.numel()), 1e-6);

  Executable unfused = compile(std::move(graph), output, *backend, {.fuse = false});
  EXPECT_EQ(unfused.fused_count(), 0u);
  EXPECT_GT(unfused.node_count(), executable.node_count());
  unfused.run(*backend);
  EXPECT_LT(testing::relative_error(unfused.tensor(output).data<float>(), expected.data<float>(), expected.numel()),
            1e-6);
}

TEST(Compile, RecordedValuesHaveNoTensorUntilRun) {
  Weights weights;
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  Builder recorder(*backend, BuildMode::record);
  Value output = record_block(recorder, weights);
  EXPECT_THROW(recorder.tensor(output), Error);
  EXPECT_THROW(recorder.linear(recorder.bind(weights.x), recorder.bind(weights.down)), Error);  // [4,16] x [16,24]
}

// Each kind's row is the kind's (the build checks the order); the kinds a model records
// have a shape rule, which names the op and the shapes that disagree; fused kinds have none.
TEST(OpTable, EveryRecordedKindHasAShapeRuleThatNamesTheOp) {
  for (int k = 0; k <= static_cast<int>(OpKind::sibling_linears); ++k) {
    const OpRow& row = op_row(static_cast<OpKind>(k));
    EXPECT_EQ(static_cast<int>(row.kind), k);
    EXPECT_EQ(row.shape == nullptr, static_cast<OpKind>(k) >= OpKind::linear_residual) << row.name;
  }
  Weights weights;
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  Builder recorder(*backend, BuildMode::record);
  const std::string linear = testing::error_of([&] { recorder.linear(recorder.bind(weights.x), recorder.bind(weights.down)); });
  EXPECT_NE(linear.find("graph: linear: input [4, 16] does not match weight [out, in] [16, 24]"), std::string::npos)
      << linear;
  const Value x = recorder.add(recorder.bind(weights.x), recorder.bind(weights.x));
  EXPECT_NE(testing::error_of([&] { recorder.reshape(x, {5, 13}); }).find("graph: reshape: [4, 16] to [5, 13]"),
            std::string::npos);
  const std::string top = testing::error_of([&] { recorder.top_k(x, 0); });
  EXPECT_NE(top.find("graph: top_k: k 0 of [4, 16]"), std::string::npos) << top;
  const auto [values, indices] = recorder.top_k(x, 3);
  const Graph graph = recorder.take_graph();
  EXPECT_EQ(graph.values[values.index].shape, (Shape{4, 3}));
  EXPECT_EQ(graph.values[indices.index].dtype, DType::i32);
}

// The tensor-parallel ops on a group of one: a column slice, an all-gather of one
// part and an in-place all-reduce compile and run as they execute eagerly.
TEST(Compile, CollectivesAndColumnSlicesOnOneProcess) {
  std::unique_ptr<backends::Backend> backend = backends::create_backend("cpu");
  std::shared_ptr<parallel::ProcessGroup> group = parallel::single_process_group();
  Weights weights;
  Builder eager(*backend, BuildMode::eager);
  Value projected = eager.linear(eager.bind(weights.x), eager.bind(weights.query));
  Value sliced = eager.slice_columns(projected, {{{2, 5}, {9, 12}, {2, 3}}});
  const Tensor whole = eager.tensor(projected);
  const Tensor part = eager.tensor(eager.all_gather(sliced, *group, {7}));
  ASSERT_EQ(part.shape(), (Shape{4, 7}));
  const int columns[] = {2, 3, 4, 9, 10, 11, 2};
  for (int row = 0; row < 4; ++row)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(part.data<float>()[row * 7 + j], whole.data<float>()[row * 16 + columns[j]]);
  EXPECT_NE(testing::error_of([&] { eager.slice_columns(projected, {{{10, 17}}}); }).find("slice_columns"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { eager.all_gather(sliced, *group, {6}); }).find("all_gather"), std::string::npos);

  Builder recorder(*backend, BuildMode::record);
  Value recorded = recorder.linear(recorder.bind(weights.x), recorder.bind(weights.query));
  Value summed = recorder.all_reduce(recorder.slice_columns(recorded, {{{2, 5}, {9, 12}, {2, 3}}}), *group);
  Graph graph = recorder.take_graph();
  EXPECT_GE(graph.values[summed.index].alias_of, 0);  // in place
  Executable executable = compile(std::move(graph), summed, *backend, {});
  executable.run(*backend);
  EXPECT_EQ(testing::to_doubles(executable.tensor(summed)), testing::to_doubles(part));
}

}  // namespace
}  // namespace shardlm::graph
