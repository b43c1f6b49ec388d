#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "tokenizer/components.h"

namespace shardlm::tokenizer::detail {

std::string read_file(const std::string& path, const char* what) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) shardlm::fail("cannot open ", what, " ", path, ": ", std::strerror(errno));
  std::string text;
  if (std::fseek(file.get(), 0, SEEK_END) == 0) {
    long size = std::ftell(file.get());
    if (size > 0) {
      limits::check_json_file_size(path, static_cast<size_t>(size));
      text.reserve(static_cast<size_t>(size));
    }
    std::fseek(file.get(), 0, SEEK_SET);
  }
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, n);
    limits::check_json_file_size(path, text.size());  // a file that grew, or a pipe
  }
  if (std::ferror(file.get())) shardlm::fail("cannot read ", what, " ", path, ": ", std::strerror(errno));
  return text;
}

JsonPath JsonPath::child(std::string_view key) const {
  return {source, path.empty() ? std::string(key) : str_cat(path, ".", key)};
}

JsonPath JsonPath::index(size_t i) const { return {source, str_cat(path, "[", i, "]")}; }

void JsonPath::fail(const std::string& what) const {
  shardlm::fail(*source, ": ", path.empty() ? std::string("top level") : path, ": ", what);
}

const Json& require(const Json& object, std::string_view key, const JsonPath& where) {
  if (!object.is_object()) where.fail("expected a JSON object");
  auto it = object.find(key);
  if (it == object.end()) where.fail(str_cat("missing key \"", key, "\""));
  return *it;
}

std::string get_string(const Json& object, std::string_view key, const JsonPath& where) {
  const Json& value = require(object, key, where);
  if (!value.is_string()) where.child(key).fail("expected a string");
  return value.get<std::string>();
}

std::string get_string_or(const Json& object, std::string_view key, const std::string& fallback,
                          const JsonPath& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) where.child(key).fail("expected a string");
  return it->get<std::string>();
}

bool get_bool_or(const Json& object, std::string_view key, bool fallback, const JsonPath& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) where.child(key).fail("expected true or false");
  return it->get<bool>();
}

int64_t get_int_or(const Json& object, std::string_view key, int64_t fallback,
                   const JsonPath& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) where.child(key).fail("expected an integer");
  return it->get<int64_t>();
}

std::string type_of(const Json& object, const JsonPath& where) {
  if (!object.is_object()) where.fail("expected a JSON object with a \"type\"");
  return get_string(object, "type", where);
}

}  // namespace shardlm::tokenizer::detail
