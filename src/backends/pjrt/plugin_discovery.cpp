// Where PJRT plugins are found, and what `shardlm devices` says of each.
#include <glob.h>

#include <cstdlib>
#include <filesystem>

#include "backends/pjrt/pjrt_backend.h"

namespace shardlm::backends::pjrt {

std::shared_ptr<Client> shared_client(const std::string& path);

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// libtpu as pip installs it: site-packages/libtpu/libtpu.so of a virtualenv, the user's
// or the system's Python.
std::vector<std::string> python_libtpu_candidates() {
  std::vector<std::string> patterns;
  if (const std::string venv = env("VIRTUAL_ENV"); !venv.empty())
    patterns.push_back(venv + "/lib/python3*/site-packages/libtpu/libtpu.so");
  if (const std::string home = env("HOME"); !home.empty()) {
    patterns.push_back(home + "/.local/lib/python3*/site-packages/libtpu/libtpu.so");
    patterns.push_back(home + "/.pyenv/versions/*/lib/python3*/site-packages/libtpu/libtpu.so");
  }
  for (const char* root : {"/usr/local/lib", "/usr/lib", "/opt/conda/lib"}) {
    patterns.push_back(std::string(root) + "/python3*/site-packages/libtpu/libtpu.so");
    patterns.push_back(std::string(root) + "/python3*/dist-packages/libtpu/libtpu.so");
  }
  std::vector<std::string> found;
  for (const std::string& pattern : patterns) {
    glob_t matches{};
    if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0)
      for (size_t i = 0; i < matches.gl_pathc; ++i) found.emplace_back(matches.gl_pathv[i]);
    ::globfree(&matches);
  }
  return found;
}

}  // namespace

std::string find_plugin(const std::string& kind, const std::string& explicit_path, std::string* searched) {
  std::vector<std::pair<std::string, std::string>> candidates;  // (where from, path)
  if (!explicit_path.empty()) candidates.emplace_back("--pjrt-plugin", explicit_path);
  if (kind == "tpu") {
    if (const std::string path = env("TPU_LIBRARY_PATH"); !path.empty()) candidates.emplace_back("TPU_LIBRARY_PATH", path);
    for (const std::string& path : python_libtpu_candidates()) candidates.emplace_back("Python's libtpu", path);
  } else {
    if (const std::string path = env("SHARDLM_PJRT_PLUGIN"); !path.empty())
      candidates.emplace_back("SHARDLM_PJRT_PLUGIN", path);
#ifdef SHARDLM_DEFAULT_PJRT_PLUGIN
    candidates.emplace_back("the plugin scripts/fetch_pjrt_plugin.sh installed", SHARDLM_DEFAULT_PJRT_PLUGIN);
#endif
  }
  std::string looked;
  for (const auto& [from, path] : candidates) {
    // An explicit path is used as given, so a wrong one is reported as wrong, not skipped.
    if (from == "--pjrt-plugin" || from == "SHARDLM_PJRT_PLUGIN" || from == "TPU_LIBRARY_PATH") return path;
    if (std::filesystem::exists(path)) return path;
    looked += (looked.empty() ? "" : ", ") + from + " (" + path + ")";
  }
  if (searched) {
    *searched = looked.empty() ? "nowhere: nothing names a plugin" : looked;
    if (kind == "tpu" && candidates.empty())
      *searched = "--pjrt-plugin, TPU_LIBRARY_PATH and Python's site-packages/libtpu: none set or found";
    if (kind != "tpu" && candidates.empty()) *searched = "--pjrt-plugin and SHARDLM_PJRT_PLUGIN: neither is set";
  }
  return "";
}

BackendInfo plugin_info(const std::string& kind, const std::string& explicit_path) {
  std::string searched;
  const std::string path = find_plugin(kind, explicit_path, &searched);
  if (path.empty()) return {kind, false, 0, "no plugin: " + searched};
  try {
    const std::shared_ptr<Client> client = shared_client(path);
    const Plugin& plugin = *client->plugin();
    std::string stablehlo = plugin.attribute("stablehlo_current_version");
    if (const std::string minimum = plugin.attribute("stablehlo_minimum_version"); !minimum.empty())
      stablehlo += " (min " + minimum + ")";
    return {kind, client->device_count() > 0, client->device_count(),
            str_cat(path, ": platform ", client->platform_name(), " ", client->platform_version(), ", PJRT ",
                    plugin.api_major(), ".", plugin.api_minor(), ", StableHLO ", stablehlo)};
  } catch (const Error& error) {
    return {kind, false, 0, str_cat(path, ": ", error.what())};
  }
}

}  // namespace shardlm::backends::pjrt
