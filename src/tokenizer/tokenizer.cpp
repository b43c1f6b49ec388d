#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/pattern.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer {
namespace {

// "ff" for the byte 0xff: how an error names a byte that is not text.
std::string hex_byte(char byte) {
  static const char digits[] = "0123456789abcdef";
  const auto value = static_cast<unsigned char>(byte);
  return {digits[value >> 4], digits[value & 15]};
}

}  // namespace

namespace detail {

std::unique_ptr<Model> make_model(const Json& json, const JsonPath& where, ModelTables* tables) {
  if (!json.is_object()) where.fail("expected the model object");
  std::string type = get_string_or(json, "type", "", where);
  if (type.empty()) {
    // Old files leave the model untagged; the library then guesses from the keys.
    if (json.contains("merges")) type = "BPE";
    else if (json.contains("max_input_chars_per_word")) type = "WordPiece";
    else where.fail("the model has no \"type\"");
  }
  if (type == "BPE") return make_bpe_model(json, where, tables);
  if (type == "WordPiece") return make_wordpiece_model(json, where, tables);
  where.fail(str_cat("unsupported model type \"", type, "\""));
}

std::shared_ptr<TokenizerImpl> TokenizerImpl::parse(std::string_view text, const std::string& source) {
  std::string skeleton;
  ModelTables tables;
  if (extract_model_tables(text, skeleton, tables)) {
    return load(Json::parse(skeleton), source, &tables);
  }
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& e) {
    fail(source, ": invalid JSON: ", e.what());
  }
  return load(json, source);
}

std::shared_ptr<TokenizerImpl> TokenizerImpl::load(const Json& json, const std::string& source,
                                                   ModelTables* tables) {
  JsonPath root{&source, ""};
  if (!json.is_object()) root.fail("expected a JSON object");
  auto impl = std::make_shared<TokenizerImpl>();
  impl->source = source;
  auto section = [&](const char* key) -> const Json& {
    static const Json null_json;
    auto it = json.find(key);
    return it == json.end() ? null_json : *it;
  };
  if (!json.contains("model")) root.fail("missing key \"model\"");
  impl->normalizer = make_normalizer(section("normalizer"), root.child("normalizer"));
  impl->pre_tokenizer = make_pre_tokenizer(section("pre_tokenizer"), root.child("pre_tokenizer"));
  impl->model = make_model(json["model"], root.child("model"), tables);
  impl->post_processor = make_post_processor(section("post_processor"), root.child("post_processor"));
  impl->decoder = make_decoder(section("decoder"), root.child("decoder"));
  impl->added.load(section("added_tokens"), root.child("added_tokens"), impl->normalizer.get());
  impl->truncation = parse_truncation(section("truncation"), root.child("truncation"));
  impl->padding = parse_padding(section("padding"), root.child("padding"));
  return impl;
}

std::optional<TokenizerImpl::Truncation> TokenizerImpl::parse_truncation(const Json& json, const JsonPath& where) {
  if (json.is_null()) return std::nullopt;
  Truncation out;
  int64_t max_length = get_int_or(json, "max_length", -1, where);
  if (max_length < 0) where.child("max_length").fail("expected a non-negative integer");
  out.max_length = static_cast<size_t>(max_length);
  std::string direction = get_string_or(json, "direction", "Right", where);
  if (direction != "Right" && direction != "Left") where.child("direction").fail("expected \"Right\" or \"Left\"");
  out.left = direction == "Left";
  return out;
}

std::optional<TokenizerImpl::Padding> TokenizerImpl::parse_padding(const Json& json, const JsonPath& where) {
  if (json.is_null()) return std::nullopt;
  Padding out;
  const Json& strategy = require(json, "strategy", where);
  if (strategy.is_object() && strategy.contains("Fixed") && strategy["Fixed"].is_number_unsigned()) {
    out.fixed_length = strategy["Fixed"].get<size_t>();
  } else if (strategy != "BatchLongest") {
    where.child("strategy").fail("expected \"BatchLongest\" or {\"Fixed\": n}");
  }
  std::string direction = get_string_or(json, "direction", "Right", where);
  if (direction != "Right" && direction != "Left") where.child("direction").fail("expected \"Right\" or \"Left\"");
  out.left = direction == "Left";
  out.multiple_of = static_cast<size_t>(std::max<int64_t>(0, get_int_or(json, "pad_to_multiple_of", 0, where)));
  out.pad_id = static_cast<int32_t>(get_int_or(json, "pad_id", 0, where));
  return out;
}

void TokenizerImpl::encode_library(std::string_view text, bool add_special_tokens, std::vector<int32_t>& ids) const {
  if (!truncation) {
    encode(text, add_special_tokens, ids);
    return;
  }
  encode(text, false, ids);
  size_t added = add_special_tokens && post_processor ? static_cast<size_t>(post_processor->added_tokens()) : 0;
  size_t budget = truncation->max_length > added ? truncation->max_length - added : 0;
  if (ids.size() > budget) {
    if (truncation->left) {
      ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(budget));
    } else {
      ids.resize(budget);
    }
  }
  if (add_special_tokens && post_processor) post_processor->process(ids);
}

void TokenizerImpl::pad(std::vector<std::vector<int32_t>>& batch) const {
  if (!padding) return;
  size_t target = 0;
  if (padding->fixed_length) {
    target = *padding->fixed_length;
  } else {
    for (const auto& ids : batch) target = std::max(target, ids.size());
  }
  if (padding->multiple_of > 0 && target % padding->multiple_of != 0) {
    target += padding->multiple_of - target % padding->multiple_of;
  }
  for (auto& ids : batch) {
    if (ids.size() >= target) continue;
    ids.insert(padding->left ? ids.begin() : ids.end(), target - ids.size(), padding->pad_id);
  }
}

void TokenizerImpl::encode_plain(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const {
  thread_local Pieces pieces;
  pieces.data.assign(text);
  pieces.refs.assign(1, PieceRef{0, static_cast<uint32_t>(text.size()), at_origin});
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
  for (const PieceRef& ref : pieces.refs) model->tokenize(pieces.view(ref), ids);
}

void TokenizerImpl::encode(std::string_view text, bool add_special_tokens,
                           std::vector<int32_t>& ids) const {
  size_t invalid = utf8::find_invalid(text);
  if (invalid != std::string_view::npos) {
    fail("tokenizer ", source, ": input text is not valid UTF-8: invalid byte 0x", hex_byte(text[invalid]),
         " at offset ", invalid, " (encode takes UTF-8 text; decode bytes from other encodings first)");
  }
  std::vector<Segment> raw_segments;
  added.raw_matcher().split(text, raw_segments);
  std::string normalized;
  std::vector<Segment> normalized_segments;
  for (const Segment& segment : raw_segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    std::string_view piece = text.substr(segment.begin, segment.end - segment.begin);
    bool at_origin = segment.begin == 0;
    if (!normalizer && added.normalized_matcher().empty()) {
      encode_plain(piece, at_origin, ids);
      continue;
    }
    normalized.assign(piece);
    if (normalizer) normalizer->normalize(normalized);
    if (normalized.empty()) continue;
    normalized_segments.clear();
    added.normalized_matcher().split(normalized, normalized_segments);
    for (const Segment& inner : normalized_segments) {
      if (inner.id >= 0) {
        ids.push_back(inner.id);
      } else {
        encode_plain(std::string_view(normalized).substr(inner.begin, inner.end - inner.begin),
                     at_origin && inner.begin == 0, ids);
      }
    }
  }
  if (add_special_tokens && post_processor) post_processor->process(ids);
}

std::optional<std::string_view> TokenizerImpl::id_to_token(int32_t id) const {
  if (auto token = added.id_to_token(id)) return token;
  return model->id_to_token(id);
}

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::optional<std::string_view> token = id_to_token(id);
    if (!token) continue;
    if (skip_special_tokens && added.is_special_id(id)) continue;
    tokens.emplace_back(*token);
  }
  if (!decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& token : tokens) out += token;
  return out;
}

}  // namespace detail

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json(detail::read_file(path, "tokenizer file"), path);
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source_name) {
  return Tokenizer(detail::TokenizerImpl::parse(json_text, source_name));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> one(1);
  impl_->encode_library(text, add_special_tokens, one[0]);
  impl_->pad(one);
  return std::move(one[0]);
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(std::span<const std::string> texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) impl_->encode_library(texts[i], add_special_tokens, out[i]);
  impl_->pad(out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text = impl_->decode(ids, skip_special_tokens);
  return clean_up_ ? clean_up_tokenization(text) : text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const int32_t* id = impl_->added.token_to_id(token)) return *id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  std::optional<std::string_view> token = impl_->id_to_token(id);
  return token ? std::string(*token) : std::string();
}

int64_t Tokenizer::vocab_size() const {
  return std::max<int64_t>(impl_->model->vocab_size(), int64_t{impl_->added.max_id()} + 1);
}

bool Tokenizer::is_special(int32_t id) const { return impl_->added.is_special_id(id); }

int64_t Tokenizer::num_special_tokens_to_add() const {
  return impl_->post_processor ? impl_->post_processor->added_tokens() : 0;
}

void Tokenizer::set_clean_up_tokenization_spaces(bool enabled) { clean_up_ = enabled; }
bool Tokenizer::clean_up_tokenization_spaces() const { return clean_up_; }
const std::string& Tokenizer::source_name() const { return impl_->source; }

std::string clean_up_tokenization(std::string_view text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string out(text);
  for (const auto& [from, to] : kRules) out = detail::Pattern::literal(from).replace_all(out, to);
  return out;
}

}  // namespace shardlm::tokenizer
