#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"

namespace shardlm::tokenizer::detail {

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
