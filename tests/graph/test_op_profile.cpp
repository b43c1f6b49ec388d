// OpProfile's table from known call times: the kinds that ran, slowest in total first,
// each with its mean, its median and 90th percentile (histogram middles, within 2.2%) and
// its longest call; and the total at the medians.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "graph/op_profile.h"

namespace shardlm::graph {
namespace {

// The table's row for `op`, split into its fields; empty if it has none.
std::vector<std::string> row_of(const std::string& table, const std::string& op) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string field; fields >> field;) row.push_back(field);
    if (!row.empty() && row[0] == op) return row;
  }
  return {};
}

TEST(OpProfile, TableHoldsEachKindsCallsMeanQuantilesAndLongest) {
  OpProfile profile;
  EXPECT_EQ(profile.table(), "");
  // linear: nine calls of 10 us and one of 1 ms; attention: four of 50 us.
  for (int i = 0; i < 9; ++i) profile.record(OpKind::linear, 10e-6);
  profile.record(OpKind::linear, 1e-3);
  for (int i = 0; i < 4; ++i) profile.record(OpKind::attention, 50e-6);
  const std::string table = profile.table();

  const std::vector<std::string> linear = row_of(table, "linear"), attention = row_of(table, "attention");
  ASSERT_EQ(linear.size(), 8u) << table;  // op, calls, total, share, mean, median, p90, max
  ASSERT_EQ(attention.size(), 8u) << table;
  EXPECT_EQ(linear[1], "10");
  EXPECT_NEAR(std::stod(linear[2]), 1.09e-3, 1e-4);
  EXPECT_NEAR(std::stod(linear[3]), 100 * 1.09 / 1.29, 0.1);  // share of the 1.29 ms total
  EXPECT_NEAR(std::stod(linear[4]), 109, 0.1);                 // mean, us
  EXPECT_NEAR(std::stod(linear[5]), 10, 10 * 0.022);           // median
  EXPECT_NEAR(std::stod(linear[6]), 10, 10 * 0.022);           // p90: the ninth of ten calls
  EXPECT_NEAR(std::stod(linear[7]), 1000, 0.1);                // longest, exact
  EXPECT_EQ(attention[1], "4");
  EXPECT_NEAR(std::stod(attention[5]), 50, 50 * 0.022);
  EXPECT_TRUE(row_of(table, "rms_norm").empty()) << "a kind that never ran has no row:\n" << table;
  EXPECT_LT(table.find("\nlinear"), table.find("\nattention")) << "the slowest in total comes first:\n" << table;

  const std::vector<std::string> total = row_of(table, "total");
  ASSERT_EQ(total.size(), 3u) << table;
  EXPECT_EQ(total[1], "14");
  // At the medians: 10 x 10 us + 4 x 50 us = 0.3 ms, 23.3% of the measured 1.29 ms.
  const size_t at = table.find("median: ");
  ASSERT_NE(at, std::string::npos) << table;
  EXPECT_NEAR(std::stod(table.substr(at + 8)), 0.3e-3, 0.3e-3 * 0.022 + 1e-4);
  EXPECT_NE(table.find("s, 23."), std::string::npos) << table;
}

TEST(OpProfile, CallsBeyondTheHistogramLandInItsEndBuckets) {
  OpProfile profile;
  profile.record(OpKind::rope, 0.0);
  profile.record(OpKind::add, 1e4);
  const std::string table = profile.table();
  EXPECT_NEAR(std::stod(row_of(table, "rope")[5]), 0.1, 0.1 * 0.022) << table;  // the 100 ns bucket
  EXPECT_EQ(row_of(table, "add")[7], "10000000000.0") << table;               // the longest stays exact
}

}  // namespace
}  // namespace shardlm::graph
