#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/components.h"

namespace shardlm::tokenizer::detail {

namespace {

// Only offsets change under ByteLevel post-processing; the ids stay as they are.
class IdentityPostProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
  int64_t added_tokens() const override { return 0; }
};

class SequencePostProcessor final : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& step : steps_) step->process(ids);
  }
  int64_t added_tokens() const override {
    int64_t total = 0;
    for (const auto& step : steps_) total += step->added_tokens();
    return total;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// The "single" template: fixed ids before and after sequence A.
class TemplatePostProcessor final : public PostProcessor {
 public:
  TemplatePostProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }
  int64_t added_tokens() const override { return static_cast<int64_t>(before_.size() + after_.size()); }

 private:
  std::vector<int32_t> before_, after_;
};

std::unique_ptr<PostProcessor> make_template(const Json& json, const JsonPath& where) {
  const Json& single = require(json, "single", where);
  if (!single.is_array()) where.child("single").fail("expected an array of template pieces");
  const Json& special = json.contains("special_tokens") ? json["special_tokens"] : Json::object();
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    JsonPath at = where.child("single").index(i);
    const Json& piece = single[i];
    if (piece.is_object() && piece.contains("Sequence")) {
      std::string id = get_string(piece["Sequence"], "id", at.child("Sequence"));
      if (id != "A") at.fail(str_cat("the single template can only hold sequence A, not ", id));
      if (seen_sequence) at.fail("sequence A appears twice in the single template");
      seen_sequence = true;
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      std::string name = get_string(piece["SpecialToken"], "id", at.child("SpecialToken"));
      if (!special.is_object() || !special.contains(name)) {
        at.fail(str_cat("special token \"", name, "\" is missing from special_tokens"));
      }
      JsonPath token_at = where.child("special_tokens").child(name);
      const Json& ids = require(special[name], "ids", token_at);
      if (!ids.is_array()) token_at.child("ids").fail("expected an array of ids");
      for (const Json& id : ids) {
        if (!id.is_number_integer()) token_at.child("ids").fail("expected integer ids");
        (seen_sequence ? after : before).push_back(id.get<int32_t>());
      }
    } else {
      at.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) where.child("single").fail("the template does not contain sequence A");
  return std::make_unique<TemplatePostProcessor>(std::move(before), std::move(after));
}

int32_t token_id_pair(const Json& json, std::string_view key, const JsonPath& where) {
  const Json& pair = require(json, key, where);
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    where.child(key).fail("expected [token, id]");
  }
  return pair[1].get<int32_t>();
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& json, const JsonPath& where) {
  if (json.is_null()) return nullptr;
  std::string type = type_of(json, where);
  if (type == "Sequence") {
    const Json& list = require(json, "processors", where);
    if (!list.is_array()) where.child("processors").fail("expected an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_post_processor(list[i], where.child("processors").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequencePostProcessor>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<IdentityPostProcessor>();
  if (type == "TemplateProcessing") return make_template(json, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<TemplatePostProcessor>(std::vector<int32_t>{token_id_pair(json, "cls", where)},
                                                   std::vector<int32_t>{token_id_pair(json, "sep", where)});
  }
  where.fail(str_cat("unsupported post_processor type \"", type, "\""));
}

}  // namespace shardlm::tokenizer::detail
