#include "graph/op_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string_view>

#include "graph/ops.h"

namespace shardlm::graph {
namespace {

constexpr double shortest_bucket_seconds = 100e-9;

// Prints the profile when the process exits, if anything was timed.
struct PrintedAtExit {
  OpProfile profile;
  ~PrintedAtExit() {
    const std::string table = profile.table();
    if (!table.empty()) std::fputs(table.c_str(), stderr);
  }
};

std::string format(const char* pattern, auto... values) {
  char line[256];
  std::snprintf(line, sizeof line, pattern, values...);
  return line;
}

}  // namespace

OpProfile* OpProfile::active() {
  static PrintedAtExit* const printed = [] {
    const char* setting = std::getenv("SHARDLM_PROFILE_OPS");
    const bool on = setting && *setting && std::string_view(setting) != "0";
    static PrintedAtExit instance;
    return on ? &instance : nullptr;
  }();
  return printed ? &printed->profile : nullptr;
}

void OpProfile::record(OpKind kind, double seconds) {
  const double steps = std::floor(steps_per_doubling * std::log2(std::max(seconds, 0.0) / shortest_bucket_seconds));
  const auto bucket = static_cast<size_t>(std::clamp<double>(steps, 0, bucket_count - 1));
  std::lock_guard lock(mutex_);
  Kind& entry = kinds_[static_cast<size_t>(kind)];
  ++entry.calls;
  entry.seconds += seconds;
  entry.longest = std::max(entry.longest, seconds);
  ++entry.histogram[bucket];
}

double OpProfile::quantile(const Kind& kind, double q) {
  const auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(kind.calls)));
  int64_t seen = 0, bucket = 0;
  const int64_t wanted = std::max<int64_t>(rank, 1);
  while (bucket + 1 < bucket_count && (seen += kind.histogram[static_cast<size_t>(bucket)]) < wanted) ++bucket;
  return shortest_bucket_seconds * std::exp2((static_cast<double>(bucket) + 0.5) / steps_per_doubling);
}

std::string OpProfile::table() const {
  std::lock_guard lock(mutex_);
  std::array<size_t, op_kind_count> order;
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return kinds_[a].seconds > kinds_[b].seconds; });
  double total = 0, at_medians = 0;
  int64_t calls = 0;
  for (const Kind& kind : kinds_) {
    total += kind.seconds;
    calls += kind.calls;
    if (kind.calls > 0) at_medians += quantile(kind, 0.5) * static_cast<double>(kind.calls);
  }
  if (calls == 0) return "";
  std::string text =
      format("shardlm op profile (SHARDLM_PROFILE_OPS): %lld ops of compiled graphs on the CPU, host time\n",
             static_cast<long long>(calls));
  text += format("%-18s %9s %10s %7s %10s %10s %10s %10s\n", "op", "calls", "total s", "share", "mean us", "median us",
                 "p90 us", "max us");
  for (const size_t i : order) {
    const Kind& kind = kinds_[i];
    if (kind.calls == 0) continue;
    text += format("%-18s %9lld %10.4f %6.1f%% %10.1f %10.1f %10.1f %10.1f\n", op_name(static_cast<OpKind>(i)),
                   static_cast<long long>(kind.calls), kind.seconds, 100 * kind.seconds / total,
                   1e6 * kind.seconds / static_cast<double>(kind.calls), 1e6 * quantile(kind, 0.5),
                   1e6 * quantile(kind, 0.9), 1e6 * kind.longest);
  }
  text += format("%-18s %9lld %10.4f\n", "total", static_cast<long long>(calls), total);
  text += format("every call at its kind's median: %.4f s, %.1f%% of the total (medians within 2.2%%)\n", at_medians,
                 100 * at_medians / total);
  return text;
}

}  // namespace shardlm::graph
