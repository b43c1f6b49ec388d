// Streaming decode by windows: each push decodes the last few ids and returns what the
// new id added past the text already returned. Leading-space rules (Strip, Metaspace)
// apply to the window's first token the same way in every decode of the window, so they
// cancel out; a window only moves forward once everything in it was returned, and only
// to a start whose decode is exactly the tail of the text returned so far.
//
// Byte-fallback tokens ("<0xE4>") are held until a different token ends their run: the
// ByteFallback decoder turns a whole run into U+FFFD per byte when any byte of it is
// invalid, so a later byte can change how earlier bytes of the run decode.

#include <algorithm>
#include <cctype>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace shardlm::tokenizer {

namespace {

constexpr size_t kMaxWindow = 8;   // ids decoded per push, at most
constexpr size_t kKeepContext = 3;  // ids kept as context when the window moves

const std::string_view kReplacement = "\xEF\xBF\xBD";

// Bytes at the end of `text` that later ids may still change.
size_t unstable_suffix(std::string_view text, bool clean_up) {
  size_t held = 0;
  // A character whose bytes have not all arrived decodes as U+FFFD for now.
  while (text.size() - held >= kReplacement.size() &&
         text.substr(text.size() - held - kReplacement.size(), kReplacement.size()) == kReplacement) {
    held += kReplacement.size();
  }
  held += utf8::incomplete_suffix_length(text.substr(0, text.size() - held));
  if (held == 0 && clean_up) {
    // clean_up_tokenization rewrites " ." " n't" " 've" ...: hold a suffix that could
    // become one of them.
    static const std::string_view kStarts[] = {" n'", " 'v", " 'r", " n", " '", " "};
    for (std::string_view start : kStarts) {
      if (text.ends_with(start)) return start.size();
    }
  }
  return held;
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDecoder::decode_window() const {
  std::span<const int32_t> window(ids_.data() + window_start_, ids_.size() - window_start_);
  return tokenizer_.decode(window, skip_special_tokens_);
}

namespace {

bool is_byte_token(const Tokenizer& tokenizer, int32_t id) {
  std::string token = tokenizer.id_to_token(id);
  return token.size() == 6 && token.starts_with("<0x") && token[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(token[3])) &&
         std::isxdigit(static_cast<unsigned char>(token[4]));
}

}  // namespace

std::string IncrementalDecoder::push(int32_t id) {
  ids_.push_back(id);
  if (is_byte_token(tokenizer_, id)) return {};
  std::string text = decode_window();
  if (!text.starts_with(window_text_)) return {};  // an earlier piece changed: wait for more
  size_t stable = text.size() - unstable_suffix(text, tokenizer_.clean_up_tokenization_spaces());
  std::string out;
  if (stable > window_text_.size()) {
    out = text.substr(window_text_.size(), stable - window_text_.size());
    window_text_ = text.substr(0, stable);
    emitted_ += out;
  }
  if (stable == text.size() && ids_.size() - window_start_ > kMaxWindow) move_window();
  return out;
}

void IncrementalDecoder::move_window() {
  size_t start = ids_.size() - kKeepContext;
  while (start > window_start_ && is_byte_token(tokenizer_, ids_[start - 1])) --start;
  if (start <= window_start_) return;
  std::span<const int32_t> window(ids_.data() + start, ids_.size() - start);
  std::string text = tokenizer_.decode(window, skip_special_tokens_);
  if (!emitted_.ends_with(text)) return;
  window_start_ = start;
  window_text_ = std::move(text);
}

std::string IncrementalDecoder::flush() {
  std::string full = tokenizer_.decode(ids_, skip_special_tokens_);
  std::string out;
  if (full.starts_with(emitted_)) {
    out = full.substr(emitted_.size());
  } else {
    std::string text = decode_window();
    if (text.size() > window_text_.size()) out = text.substr(window_text_.size());
  }
  ids_.clear();
  window_start_ = 0;
  window_text_.clear();
  emitted_.clear();
  return out;
}

}  // namespace shardlm::tokenizer
