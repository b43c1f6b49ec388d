#include "tokenizer/tokenize_stream.h"

#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "core/error.h"

namespace shardlm::tokenizer {

namespace {

using Json = nlohmann::json;

std::vector<int32_t> parse_ids(const std::string& line, size_t number) {
  Json value;
  try {
    value = Json::parse(line);
  } catch (const Json::parse_error& e) {
    fail("line ", number, ": invalid JSON: ", e.what());
  }
  const Json* ids = &value;
  if (value.is_object()) {
    auto it = value.find("ids");
    if (it == value.end()) fail("line ", number, ": expected {\"ids\": [...]}");
    ids = &*it;
  }
  if (!ids->is_array()) fail("line ", number, ": expected {\"ids\": [...]} or an array of ids");
  std::vector<int32_t> out;
  out.reserve(ids->size());
  for (const Json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      fail("line ", number, ": ids must be non-negative integers");
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

}  // namespace

void run_tokenize_stream(const PretrainedTokenizer& tokenizer, std::istream& in, std::ostream& out,
                         const TokenizeStreamOptions& options) {
  EncodeOptions encode_options;
  encode_options.add_special_tokens = options.add_special_tokens;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r' && !options.plain) line.pop_back();
    std::string result;
    if (options.decode) {
      if (line.empty()) continue;
      result = Json(tokenizer.decode(parse_ids(line, number), options.skip_special_tokens))
                   .dump(-1, ' ', false, Json::error_handler_t::replace);
    } else {
      std::string text;
      if (options.plain) {
        text = line;
      } else {
        if (line.empty()) continue;
        Json value;
        try {
          value = Json::parse(line);
        } catch (const Json::parse_error& e) {
          fail("line ", number, ": invalid JSON: ", e.what());
        }
        if (!value.is_string()) fail("line ", number, ": expected a JSON string (use --plain for raw text)");
        text = value.get<std::string>();
      }
      std::vector<int32_t> ids;
      try {
        ids = tokenizer.encode(text, encode_options).input_ids.at(0);
      } catch (const Error& e) {
        fail("line ", number, ": ", e.what());
      }
      result = Json{{"ids", ids}}.dump();
    }
    out << result << '\n';
    out.flush();
  }
}

}  // namespace shardlm::tokenizer
