// The `shardlm` command line: the input is split at newlines into arguments and parsed by
// the real command tree (conversions, validators, requirements); once parsing is complete
// the commands' actions are skipped: they are covered by the test suite.
#include <string>
#include <vector>

#include "cli/commands.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardlm;
  std::vector<std::string> arguments{"shardlm"};
  std::string current;
  for (char c : fuzz::as_text(data, size)) {
    if (c == '\n') {
      arguments.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  arguments.push_back(current);
  CLI::App app;
  cli::add_commands(app);
  // Runs after every option is converted and checked, before any command's action.
  app.parse_complete_callback([] { throw CLI::Success(); });
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  }
  return 0;
}
