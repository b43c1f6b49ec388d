#pragma once
// A byte-exact implementation of Hugging Face tokenizer.json (the `tokenizers` library):
// added tokens, normalizer, pre-tokenizer, model, post-processor and decoder.
//
// A Tokenizer is immutable after loading and safe to use from several threads; copies
// share the loaded tables, so copying and moving are cheap.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardlm::tokenizer {

namespace detail {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // Reads and parses a tokenizer.json file. Throws shardlm::Error naming the file, the
  // JSON key or component and what is wrong (including unsupported components).
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  // `source_name` only appears in error messages (a path or "<memory>").
  static Tokenizer from_json(std::string_view json_text, const std::string& source_name);

  // Ids as `tokenizers.Tokenizer.encode(text, add_special_tokens=...).ids`.
  // Throws shardlm::Error if `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // One result per text, each as encode() gives it.
  std::vector<std::vector<int32_t>> encode_batch(std::span<const std::string> texts,
                                                 bool add_special_tokens) const;

  // As `tokenizers.Tokenizer.decode`. Ids outside the vocabulary are skipped, as the
  // library does. Applies clean_up_tokenization_spaces when it was switched on.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // "" for an id that names no token.
  std::string id_to_token(int32_t id) const;
  // One past the largest id of the model vocabulary and the added tokens: the number
  // of rows an embedding table indexed by these ids needs.
  int64_t vocab_size() const;
  // True for added tokens marked "special" (what skip_special_tokens drops).
  bool is_special(int32_t id) const;
  // How many ids the post-processor adds to one sequence when add_special_tokens is true.
  int64_t num_special_tokens_to_add() const;

  // transformers' clean_up_tokenization (" ." -> "." and friends) after decode; off by
  // default because tokenizer.json does not carry it (tokenizer_config.json does).
  void set_clean_up_tokenization_spaces(bool enabled);
  bool clean_up_tokenization_spaces() const;

  // Where this tokenizer was loaded from, for messages.
  const std::string& source_name() const;

  // The implementation, for the pretrained-tokenizer wrapper in this directory.
  const detail::TokenizerImpl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::shared_ptr<detail::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::TokenizerImpl> impl_;
  bool clean_up_ = false;
  friend struct detail::TokenizerImpl;
};

// Turns ids arriving one at a time (generation) into text. push() returns only text
// that no later id can change: never half a UTF-8 character, never a space that a
// decoder would strip. The concatenation of every push() and the final flush() equals
// tokenizer.decode(all ids, skip_special_tokens).
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string push(int32_t id);
  // Returns whatever is still held back and resets the decoder for a new sequence.
  std::string flush();

 private:
  std::string decode_window() const;
  void move_window();

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;     // every id pushed since the last flush
  size_t window_start_ = 0;      // ids_[window_start_..] are decoded on each push
  std::string window_text_;      // the part of decode(window) already returned
  std::string emitted_;          // everything returned since the last flush
};

// clean_up_tokenization from transformers: removes the space before . ? ! , and
// before the English contractions 'm 's 've 're n't, and around a lone '.
std::string clean_up_tokenization(std::string_view text);

}  // namespace shardlm::tokenizer
