#include "parallel/fault_injection.h"

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/logging.h"

namespace shardlm::parallel {
namespace {

constexpr const char* variable = "SHARDLM_INJECT_FAULT";

struct Fault {
  int rank = 0;
  int64_t step = 0;
  double delay_s = 0;  // 0: raise an error instead
};

Fault parse_fault(const std::string& text) {
  const auto bad = [&] {
    fail(variable, "='", text, "' is not RANK:STEP:error or RANK:STEP:delay=SECONDS (e.g. 1:5:error)");
  };
  const size_t first = text.find(':'), second = text.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) bad();
  Fault fault;
  try {
    size_t used = 0;
    fault.rank = std::stoi(text.substr(0, first), &used);
    if (used != first) bad();
    fault.step = std::stoll(text.substr(first + 1, second - first - 1), &used);
    if (used != second - first - 1) bad();
    const std::string action = text.substr(second + 1);
    if (action.starts_with("delay=")) {
      fault.delay_s = std::stod(action.substr(6), &used);
      if (used != action.size() - 6 || !(fault.delay_s > 0)) bad();
    } else if (action != "error") {
      bad();
    }
  } catch (const std::logic_error&) {  // stoi and friends: no number, or out of range
    bad();
  }
  return fault;
}

const std::optional<Fault>& asked_fault() {
  static const std::optional<Fault> fault = []() -> std::optional<Fault> {
    const char* text = std::getenv(variable);
    if (!text || !*text) return std::nullopt;
    return parse_fault(text);
  }();
  return fault;
}

}  // namespace

void inject_fault_if_asked(const ProcessGroup& group, int64_t step) {
  const std::optional<Fault>& fault = asked_fault();
  if (!fault || fault->rank != group.rank() || fault->step != step) return;
  if (fault->delay_s == 0)
    fail("injected fault (", variable, ") at step ", step, " on ", group.describe_rank(group.rank()));
  log::warning(str_cat("injected delay (", variable, ") of ", fault->delay_s, " s at step ", step));
  std::this_thread::sleep_for(std::chrono::duration<double>(fault->delay_s));
}

}  // namespace shardlm::parallel
