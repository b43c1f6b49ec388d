#include "models/sharded.h"

namespace shardlm::models {

using graph::Builder;
using graph::Value;
using parallel::ShardStyle;

bool Linear::splits_output() const { return style == ShardStyle::colwise || style == ShardStyle::packed_colwise; }

bool Linear::splits_input() const {
  return style == ShardStyle::rowwise || style == ShardStyle::rowwise_split_input ||
         style == ShardStyle::packed_rowwise;
}

FeatureSplit even_feature_split(const WeightLoader& loader, int64_t out_features, int64_t in_features,
                                int64_t unit) {
  FeatureSplit split{.out_features = out_features, .in_features = in_features};
  split.output = parallel::even_split(out_features / unit, unit, loader.tp_rank(), loader.tp_size());
  split.output_sizes = parallel::even_split_sizes(out_features / unit, unit, loader.tp_size());
  split.input = parallel::even_split(in_features / unit, unit, loader.tp_rank(), loader.tp_size());
  return split;
}

Linear load_linear(WeightLoader& loader, const std::string& module, const FeatureSplit& split, bool bias,
                   const std::string& stored_name) {
  const std::string weight_name = module + ".weight", bias_name = module + ".bias";
  const std::string& read_name = stored_name.empty() ? weight_name : stored_name;
  const Shape whole{split.out_features, split.in_features};
  Linear linear{.style = loader.style_for(weight_name), .split = split};
  if (linear.style == ShardStyle::embedding_rowwise)
    fail("the tp_plan gives '", module, "' the style 'embedding_rowwise', which applies only to embeddings: use "
         "colwise, rowwise, colwise_gather_output, rowwise_split_input or replicate for a linear projection");
  const bool output_split = linear.splits_output() || linear.style == ShardStyle::colwise_gather_output;
  if (output_split || linear.splits_input()) {
    const parallel::Segments& part = output_split ? split.output : split.input;
    if (part.size() == 0)
      fail("'", module, "' cannot be split ", parallel::shard_style_name(linear.style), " over tp_size ",
           loader.tp_size(), ": rank ", loader.tp_rank(), " would get none of its ",
           output_split ? split.out_features : split.in_features, " features (too few heads or rows for this many "
           "ranks); use a smaller tp_size or replicate '", module, "' in the tp_plan");
  }
  if (output_split) {
    linear.weight = loader.require_part(read_name, whole, &split.output, nullptr);
    if (bias) linear.bias = loader.require_part(bias_name, {split.out_features}, &split.output, nullptr);
  } else if (linear.splits_input()) {
    linear.weight = loader.require_part(read_name, whole, nullptr, &split.input);
    // Every rank adds its partial product; the bias is added once, by rank 0.
    if (bias && loader.tp_rank() == 0) linear.bias = loader.require_part(bias_name, {split.out_features}, nullptr, nullptr);
  } else {
    linear.weight = loader.require_part(read_name, whole, nullptr, nullptr);
    if (bias) linear.bias = loader.require_part(bias_name, {split.out_features}, nullptr, nullptr);
  }
  return linear;
}

Embedding load_embedding(WeightLoader& loader, const std::string& name, int64_t vocab, int64_t hidden) {
  const ShardStyle style = loader.style_for(name);
  if (style == ShardStyle::replicate) return {.table = loader.require_part(name, {vocab, hidden}, nullptr, nullptr)};
  if (style != ShardStyle::embedding_rowwise)
    fail("the tp_plan gives the embedding '", name, "' the style '", parallel::shard_style_name(style),
         "': an embedding is split with 'embedding_rowwise' (along the vocabulary) or kept whole with 'replicate'");
  const parallel::Segments rows = parallel::even_split(vocab, 1, loader.tp_rank(), loader.tp_size());
  return {.table = loader.require_part(name, {vocab, hidden}, &rows, nullptr),
          .first_row = rows.ranges.front().first,
          .vocab_split = true};
}

Value to_whole(Builder& builder, parallel::ProcessGroup& group, const Sharded& x) {
  switch (x.layout) {
    case Sharded::Layout::whole: return x.value;
    case Sharded::Layout::partial: return builder.all_reduce(x.value, group);
    case Sharded::Layout::split: return builder.all_gather(x.value, group, x.sizes);
  }
  return x.value;
}

Sharded apply(Builder& builder, parallel::ProcessGroup& group, const Sharded& x, const Linear& linear) {
  Value input;
  if (!linear.splits_input()) {
    input = to_whole(builder, group, x);
  } else if (x.layout == Sharded::Layout::split && x.features == linear.split.input) {
    input = x.value;  // already this rank's columns, e.g. the heads it attended
  } else {
    input = builder.slice_columns(to_whole(builder, group, x), linear.split.input);
  }
  Sharded y{.value = builder.linear(input, builder.bind(linear.weight),
                                    linear.bias.defined() ? builder.bind(linear.bias) : Value{})};
  if (linear.splits_output()) {
    y.layout = Sharded::Layout::split;
    y.features = linear.split.output;
    y.sizes = linear.split.output_sizes;
  } else if (linear.style == ShardStyle::colwise_gather_output) {
    y.value = builder.all_gather(y.value, group, linear.split.output_sizes);
  } else if (linear.splits_input()) {
    y.layout = Sharded::Layout::partial;
  }
  return y;
}

Value embed(Builder& builder, parallel::ProcessGroup& group, const Embedding& embedding, Value ids) {
  Value rows = builder.embedding(builder.bind(embedding.table), ids, embedding.first_row);  // [tokens, hidden]
  return embedding.vocab_split ? builder.all_reduce(rows, group) : rows;
}

}  // namespace shardlm::models
