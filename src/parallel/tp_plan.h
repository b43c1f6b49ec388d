#pragma once
// Tensor-parallel plans as transformers writes them: a map from parameter or module
// names, with layer indices written as `*`, to style strings. An architecture
// declares its default plan; a user plan overrides it rule by rule.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardlm::parallel {

// How one weight is split across the ranks of a tensor-parallel group.
enum class ShardStyle {
  colwise,                // output features split: weight rows (and bias) sharded, output sharded
  rowwise,                // input features split: weight columns sharded, outputs summed across ranks
  colwise_gather_output,  // colwise, then the output gathered whole on every rank ("colwise_rep")
  rowwise_split_input,    // rowwise on a whole input: each rank takes its columns first ("rowwise_rep")
  replicate,              // every rank holds it whole ("replicated_with_grad_allreduce" for inference)
  embedding_rowwise,      // an embedding split along the vocabulary; looked-up rows summed across ranks
  packed_colwise,         // colwise on a fused weight: each packed part (e.g. gate and up) split alike
  packed_rowwise,         // rowwise on a fused input: each packed part's columns split alike
};

// The style a plan string names; aliases as transformers accepts them. An unknown
// string is an error naming `where` and listing the valid styles.
ShardStyle parse_shard_style(const std::string& text, const std::string& where);
std::string shard_style_name(ShardStyle style);
// Every style string accepted, aliases included.
std::vector<std::string> shard_style_names();

class TpPlan {
 public:
  TpPlan() = default;
  // `rules`: key -> style string, each key checked; `source` names where they came from.
  TpPlan(const std::map<std::string, std::string>& rules, const std::string& source);
  // A JSON object file {"model.layers.*.self_attn.q_proj": "replicate", ...}.
  static TpPlan from_json_file(const std::string& path);
  // A JSON object text, `source` naming it in errors.
  static TpPlan from_json_text(const std::string& text, const std::string& source);

  // This plan's rules with `overrides`' rules replacing or adding to them.
  TpPlan overridden_by(const TpPlan& overrides) const;

  // The style for parameter `name` (e.g. "model.layers.3.self_attn.q_proj.weight"),
  // matched as transformers matches: the exact parameter name, then its module name,
  // then both with every run of digits written as `*`. Records which rule matched.
  std::optional<ShardStyle> style_for(const std::string& name) const;
  // Rules no style_for call has matched yet: a user rule naming nothing is a mistake.
  std::vector<std::string> unmatched_rules() const;
  bool empty() const { return rules_.empty(); }
  const std::map<std::string, ShardStyle>& rules() const { return rules_; }

 private:
  std::map<std::string, ShardStyle> rules_;
  mutable std::set<std::string> matched_;
};

// Each layer index written as `*`: "model.layers.12.mlp" -> "model.layers.*.mlp".
std::string generic_name(const std::string& name);

}  // namespace shardlm::parallel
