#pragma once
// The loaded pipeline behind a Tokenizer, shared by its copies.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/components.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace shardlm::tokenizer::detail {

struct ModelTables;

// `tables`, when given, holds model.vocab and model.merges scanned from the file (the
// JSON then has empty placeholders for them).
std::unique_ptr<Model> make_model(const Json& json, const JsonPath& where, ModelTables* tables);
std::unique_ptr<Model> make_bpe_model(const Json& json, const JsonPath& where, ModelTables* tables);
std::unique_ptr<Model> make_wordpiece_model(const Json& json, const JsonPath& where, ModelTables* tables);
// Vocab entries into `vocab` (a repeated token keeps its last id); returns the largest id.
int32_t fill_vocab(std::vector<std::pair<std::string, int64_t>> entries, TokenMap& vocab, const JsonPath& where);
ModelTables tables_from_json(const Json& json, const JsonPath& where, bool with_merges);

struct TokenizerImpl {
  std::string source;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;

  // tokenizer.json's "truncation" and "padding", which the library applies in encode
  // (transformers resets both per call, so PretrainedTokenizer does not use them).
  struct Truncation {
    size_t max_length = 0;
    bool left = false;
  };
  struct Padding {
    std::optional<size_t> fixed_length;  // nullopt: pad to the longest of the batch
    size_t multiple_of = 0;
    bool left = false;
    int32_t pad_id = 0;
  };
  std::optional<Truncation> truncation;
  std::optional<Padding> padding;

  static std::shared_ptr<TokenizerImpl> load(const Json& json, const std::string& source,
                                             ModelTables* tables = nullptr);
  // Parses tokenizer.json text, scanning the large tables directly when it can.
  static std::shared_ptr<TokenizerImpl> parse(std::string_view text, const std::string& source);
  static Tokenizer wrap(std::shared_ptr<TokenizerImpl> impl) { return Tokenizer(std::move(impl)); }

  // The pipeline without tokenizer.json's truncation and padding.
  void encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>& ids) const;
  // With tokenizer.json's truncation, as the library's encode does; pad() then pads.
  void encode_library(std::string_view text, bool add_special_tokens, std::vector<int32_t>& ids) const;
  void pad(std::vector<std::vector<int32_t>>& batch) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  std::optional<std::string_view> id_to_token(int32_t id) const;

 private:
  static std::optional<Truncation> parse_truncation(const Json& json, const JsonPath& where);
  static std::optional<Padding> parse_padding(const Json& json, const JsonPath& where);
  void encode_plain(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;
};

}  // namespace shardlm::tokenizer::detail
