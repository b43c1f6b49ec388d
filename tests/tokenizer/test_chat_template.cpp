// Byte-for-byte comparison with transformers' apply_chat_template, using the renders that
// tests/data/chat_templates/make_goldens.py recorded (see the README there).

#include <cctype>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace shardlm::tokenizer {
namespace {

using nlohmann::ordered_json;

const std::string kDataDir = std::string(SHARDLM_TEST_DATA_DIR) + "/chat_templates";

ordered_json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  return ordered_json::parse(in);
}

const ordered_json& goldens() {
  static const ordered_json data = read_json(kDataDir + "/goldens.json");
  return data;
}

const ChatTemplate& real_template(const std::string& name) {
  static std::map<std::string, ChatTemplate> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string path = kDataDir + "/" + name + "/tokenizer_config.json";
    const ordered_json config = read_json(path);
    it = cache.emplace(name, ChatTemplate::parse(config.at("chat_template").get<std::string>(), path)).first;
  }
  return it->second;
}

struct GoldenCase {
  std::string section;
  size_t index;
  std::string name;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.section << "[" << c.index << "] " << c.name; }

std::vector<GoldenCase> cases_of(const std::string& section) {
  std::vector<GoldenCase> out;
  const auto& list = goldens().at(section);
  for (size_t i = 0; i < list.size(); ++i) out.push_back({section, i, list[i].at("name").get<std::string>()});
  return out;
}

std::string test_name(const testing::TestParamInfo<GoldenCase>& info) {
  std::string name = std::to_string(info.param.index) + "_" + info.param.name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// Shows where two renders first differ, which a long prompt otherwise hides.
std::string first_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  std::ostringstream out;
  out << "first difference at byte " << i << "\n  expected: " << ordered_json(expected.substr(i, 80)).dump()
      << "\n  actual:   " << ordered_json(actual.substr(i, 80)).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return out.str();
}

void check(const ordered_json& golden, const std::function<std::string()>& render) {
  if (golden.contains("error")) {
    EXPECT_THROW(render(), Error) << "transformers raised: " << golden["error"].get<std::string>();
    return;
  }
  const std::string expected = golden.at("expected").get<std::string>();
  std::string actual;
  try {
    actual = render();
  } catch (const Error& e) {
    FAIL() << "threw: " << e.what() << "\nexpected: " << ordered_json(expected).dump();
  }
  EXPECT_TRUE(actual == expected) << first_difference(expected, actual);
}

class RealTemplateGolden : public testing::TestWithParam<GoldenCase> {};

TEST_P(RealTemplateGolden, RendersLikeApplyChatTemplate) {
  const ordered_json& golden = goldens().at("chats").at(GetParam().index);
  const ChatTemplate& chat_template = real_template(golden.at("template").get<std::string>());
  ChatRenderOptions options;
  options.add_generation_prompt = golden.at("add_generation_prompt").get<bool>();
  options.tools = golden.at("tools");
  options.documents = golden.at("documents");
  if (golden.contains("continue_final_message")) {
    options.continue_final_message = golden.at("continue_final_message").get<std::string>();
  }
  for (const auto& [key, value] : golden.at("special_tokens").items()) {
    const std::string token = value.get<std::string>();
    if (key == "bos_token") {
      options.bos_token = token;
    } else if (key == "eos_token") {
      options.eos_token = token;
    } else if (key == "unk_token") {
      options.unk_token = token;
    } else if (key == "pad_token") {
      options.pad_token = token;
    } else {
      options.extra_variables[key] = token;
    }
  }
  for (const auto& [key, value] : golden.at("extra_variables").items()) options.extra_variables[key] = value;
  check(golden, [&] { return chat_template.render(golden.at("messages"), options); });
}

INSTANTIATE_TEST_SUITE_P(Goldens, RealTemplateGolden, testing::ValuesIn(cases_of("chats")), test_name);

class FeatureGolden : public testing::TestWithParam<GoldenCase> {};

TEST_P(FeatureGolden, RendersLikeJinja2) {
  const ordered_json& golden = goldens().at("features").at(GetParam().index);
  check(golden, [&] {
    const ChatTemplate t = ChatTemplate::parse(golden.at("source").get<std::string>(), golden.at("name").get<std::string>());
    ChatRenderOptions options;
    options.extra_variables = golden.at("variables");
    const ordered_json& extra = golden.at("options");
    if (extra.contains("tools")) options.tools = extra.at("tools");
    if (extra.contains("documents")) options.documents = extra.at("documents");
    if (extra.contains("add_generation_prompt")) options.add_generation_prompt = extra.at("add_generation_prompt").get<bool>();
    // make_goldens.py pins datetime.now() to this moment.
    std::tm fixed{};
    fixed.tm_year = 2026 - 1900;
    fixed.tm_mon = 0;
    fixed.tm_mday = 15;
    fixed.tm_hour = 9;
    fixed.tm_min = 5;
    fixed.tm_sec = 7;
    options.strftime_now_time = fixed;
    return t.render(ordered_json::array({{{"role", "user"}, {"content", "hi"}}}), options);
  });
}

INSTANTIATE_TEST_SUITE_P(Goldens, FeatureGolden, testing::ValuesIn(cases_of("features")), test_name);

class MalformedTemplate : public testing::TestWithParam<GoldenCase> {};

TEST_P(MalformedTemplate, FailsToParse) {
  const ordered_json& golden = goldens().at("malformed").at(GetParam().index);
  EXPECT_THROW(ChatTemplate::parse(golden.at("source").get<std::string>(), "malformed.jinja"), Error)
      << "jinja2 says: " << golden.at("error").get<std::string>();
}

INSTANTIATE_TEST_SUITE_P(Goldens, MalformedTemplate, testing::ValuesIn(cases_of("malformed")), test_name);

TEST(ChatTemplateGoldens, CoverEveryRealTemplate) {
  std::map<std::string, int> rendered;
  for (const auto& golden : goldens().at("chats")) {
    if (golden.contains("expected")) ++rendered[golden.at("template").get<std::string>()];
  }
  for (const char* name : {"qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"}) {
    EXPECT_GE(rendered[name], 10) << name;
  }
}

}  // namespace
}  // namespace shardlm::tokenizer
