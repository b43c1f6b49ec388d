#pragma once
// The pipeline stages of a tokenizer.json, as internal interfaces. Each stage's
// factory reads its JSON object and throws shardlm::Error for anything it does not
// implement exactly.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shardlm::tokenizer::detail {

using Json = nlohmann::json;

// Where a JSON value sits, for error messages: "tokenizer.json: pre_tokenizer.pretokenizers[0]".
struct JsonPath {
  const std::string* source;
  std::string path;
  JsonPath child(std::string_view key) const;
  JsonPath index(size_t i) const;
  [[noreturn]] void fail(const std::string& what) const;
};

// Reads a whole file; `what` names it in the error ("tokenizer file").
std::string read_file(const std::string& path, const char* what);

// Typed accessors that fail with the JSON path instead of nlohmann's generic messages.
const Json& require(const Json& object, std::string_view key, const JsonPath& where);
std::string get_string(const Json& object, std::string_view key, const JsonPath& where);
std::string get_string_or(const Json& object, std::string_view key, const std::string& fallback,
                          const JsonPath& where);
bool get_bool_or(const Json& object, std::string_view key, bool fallback, const JsonPath& where);
int64_t get_int_or(const Json& object, std::string_view key, int64_t fallback, const JsonPath& where);
std::string type_of(const Json& object, const JsonPath& where);

// Pre-tokenized text: pieces are byte ranges of `data`. Stages that only split keep
// `data`; stages that rewrite text build a new one.
struct PieceRef {
  uint32_t begin;
  uint32_t end;
  // The piece starts at the start of the original input (Metaspace prepend_scheme "first").
  bool at_origin;
};
struct Pieces {
  std::string data;
  std::vector<PieceRef> refs;
  std::string_view view(const PieceRef& r) const { return {data.data() + r.begin, r.end - r.begin}; }
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized piece.
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& ids) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // nullopt when the model has no such id.
  virtual std::optional<std::string_view> id_to_token(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;  // one past the largest id
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens around one sequence (only called with add_special_tokens).
  virtual void process(std::vector<int32_t>& ids) const = 0;
  virtual int64_t added_tokens() const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Looks a token up in the model and the added tokens (TemplateProcessing needs ids).
class VocabLookup {
 public:
  virtual ~VocabLookup() = default;
  virtual std::optional<int32_t> find(std::string_view token) const = 0;
};

std::unique_ptr<Normalizer> make_normalizer(const Json& json, const JsonPath& where);
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& json, const JsonPath& where);
std::unique_ptr<PostProcessor> make_post_processor(const Json& json, const JsonPath& where);
std::unique_ptr<Decoder> make_decoder(const Json& json, const JsonPath& where);

// True when a character, wherever it stands, is left alone by the Unicode normalization
// form (NFC: compose, NFD: !compose, NFKC/NFKD: compatibility): the fast path that lets
// the normalizers skip normalized text.
bool normalization_stable(uint32_t c, bool compose, bool compatibility);

// GPT-2's reversible map from bytes to printable characters (ByteLevel).
const std::array<uint32_t, 256>& byte_to_char();
// -1 for a character that is not the image of a byte.
int byte_of_char(uint32_t c);

}  // namespace shardlm::tokenizer::detail
