#pragma once
// Weights as one tensor-parallel rank holds them, and the collectives that put their
// results back together. With tp_size 1 every weight is whole and no collective is
// recorded, so single-process graphs are unchanged.
//
// A block says how each projection's features split across ranks (query heads, the KV
// heads those heads read, the MLP's intermediate features, the vocabulary); the plan's
// style for the weight says whether its output features (colwise) or input features
// (rowwise) follow that split, or whether it stays whole (replicate). Activations carry
// their layout, and apply() inserts the gather, sum or column slice a style needs.

#include <string>
#include <vector>

#include "graph/builder.h"
#include "models/weights.h"
#include "parallel/sharding.h"

namespace shardlm::models {

// How a projection's features split across ranks, as its block defines them.
struct FeatureSplit {
  int64_t out_features = 0, in_features = 0;  // whole
  parallel::Segments output{};                // this rank's output features, if split colwise
  std::vector<int64_t> output_sizes{};        // every rank's output feature count, to gather
  parallel::Segments input{};                 // this rank's input features, if split rowwise
};

struct Linear {
  Tensor weight{};  // [out_features, in_features] of this rank
  Tensor bias{};    // [out_features] of this rank, or undefined (rowwise: rank 0 holds it)
  parallel::ShardStyle style = parallel::ShardStyle::replicate;
  FeatureSplit split;
  bool splits_output() const;  // colwise, packed_colwise (not gathered)
  bool splits_input() const;   // rowwise, rowwise_split_input, packed_rowwise
};

// Loads `module`.weight (+ `module`.bias) split as the plan's style for it says.
// `stored_name`, when given, is the tensor read instead of `module`.weight (tied weights).
Linear load_linear(WeightLoader& loader, const std::string& module, const FeatureSplit& split, bool bias,
                   const std::string& stored_name = {});
// The even split of `out_features` (in whole units of `unit`, e.g. a head's dim) for a
// colwise weight, and of `in_features` for a rowwise one.
FeatureSplit even_feature_split(const WeightLoader& loader, int64_t out_features, int64_t in_features,
                                int64_t unit = 1);

struct Embedding {
  Tensor table;          // [vocab, hidden], or this rank's [vocab shard, hidden]
  int64_t first_row = 0;  // the id of table's first row
  bool vocab_split = false;
};
Embedding load_embedding(WeightLoader& loader, const std::string& name, int64_t vocab, int64_t hidden);

// An activation and how it is laid out across ranks.
struct Sharded {
  enum class Layout { whole, split, partial } layout = Layout::whole;
  graph::Value value;             // [rows, features] (this rank's features when split)
  parallel::Segments features{};  // split: this rank's features
  std::vector<int64_t> sizes{};   // split: every rank's feature count
};

// x through `linear`, first gathering, summing or slicing x as the weight needs.
Sharded apply(graph::Builder& builder, parallel::ProcessGroup& group, const Sharded& x, const Linear& linear);
// The whole activation on every rank.
graph::Value to_whole(graph::Builder& builder, parallel::ProcessGroup& group, const Sharded& x);
// ids i32 [tokens] -> whole [tokens, hidden]
graph::Value embed(graph::Builder& builder, parallel::ProcessGroup& group, const Embedding& embedding,
                   graph::Value ids);

}  // namespace shardlm::models
