#pragma once
// Runs the `shardlm` binary as a user would and captures what it printed.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace shardlm::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// `shardlm ARGUMENTS` through the shell, with `input` on standard input. The
// environment is the test process's own (set variables before calling).
inline CommandResult run_shardlm(const std::string& arguments, const std::string& input = "") {
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("shardlm_cli_" + std::to_string(::getpid()))).string();
  const std::string in_path = scratch + ".in", err_path = scratch + ".err";
  std::ofstream(in_path) << input;
  const std::string command = std::string(SHARDLM_CLI_PATH) + " " + arguments + " <" + in_path + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(in_path);
  std::filesystem::remove(err_path);
  return result;
}

}  // namespace shardlm::testing
