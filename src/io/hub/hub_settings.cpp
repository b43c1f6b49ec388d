#include "io/hub/hub_settings.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace shardlm::io::hub {
namespace {

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::filesystem::path home_directory() {
  if (auto home = environment("HOME")) return *home;
  fail("cannot find the Hugging Face cache: HOME is not set. Set HF_HUB_CACHE or HF_HOME to a directory");
}

std::string trimmed(const std::string& text) {
  auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(text.begin(), text.end(), is_space);
  auto end = std::find_if_not(text.rbegin(), std::make_reverse_iterator(begin), is_space).base();
  return std::string(begin, end);
}

long seconds_from(const char* name, long fallback) {
  auto value = environment(name);
  if (!value) return fallback;
  try {
    size_t used = 0;
    double seconds = std::stod(*value, &used);
    if (used == value->size() && seconds > 0) return std::max(1L, static_cast<long>(seconds));
  } catch (const std::exception&) {
  }
  fail(name, "='", *value, "' is not a positive number of seconds");
}

// huggingface_hub's reading of boolean variables: 1, ON, YES, TRUE in any case.
bool is_true_value(std::string_view value) {
  std::string upper(value);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper == "1" || upper == "ON" || upper == "YES" || upper == "TRUE";
}

}  // namespace

HubSettings settings_from_environment() {
  HubSettings settings;
  if (auto endpoint = environment("HF_ENDPOINT")) {
    settings.endpoint = *endpoint;
    while (!settings.endpoint.empty() && settings.endpoint.back() == '/') settings.endpoint.pop_back();
  }

  std::filesystem::path hf_home;
  if (auto value = environment("HF_HOME")) hf_home = *value;
  else if (auto xdg = environment("XDG_CACHE_HOME")) hf_home = std::filesystem::path(*xdg) / "huggingface";
  else hf_home = home_directory() / ".cache" / "huggingface";
  if (auto cache = environment("HF_HUB_CACHE")) settings.cache_dir = *cache;
  else settings.cache_dir = hf_home / "hub";

  settings.token_path = hf_home / "token";
  if (auto path = environment("HF_TOKEN_PATH")) settings.token_path = *path;
  if (auto token = environment("HF_TOKEN")) {
    settings.token = trimmed(*token);
    settings.token_source = "HF_TOKEN";
  } else if (std::ifstream file(settings.token_path); file) {
    std::stringstream contents;
    contents << file.rdbuf();
    std::string token = trimmed(contents.str());
    if (!token.empty()) {
      settings.token = token;
      settings.token_source = settings.token_path.string();
    }
  }

  if (auto offline = environment("HF_HUB_OFFLINE")) settings.offline = is_true_value(*offline);
  if (auto disabled = environment("HF_HUB_DISABLE_PROGRESS_BARS"))
    settings.progress_bars_disabled = is_true_value(*disabled);
  settings.metadata_timeout_seconds = seconds_from("HF_HUB_ETAG_TIMEOUT", settings.metadata_timeout_seconds);
  settings.download_timeout_seconds = seconds_from("HF_HUB_DOWNLOAD_TIMEOUT", settings.download_timeout_seconds);
  return settings;
}

}  // namespace shardlm::io::hub
