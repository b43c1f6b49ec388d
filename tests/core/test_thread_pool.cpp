#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"

namespace shardlm {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceAcrossManyRuns) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  for (int64_t count : {0, 1, 2, 5, 64, 1000}) {
    for (int repeat = 0; repeat < 50; ++repeat) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
      pool.run(count, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << count << " " << i;
    }
  }
}

TEST(ThreadPool, RethrowsATaskErrorAndStaysUsable) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run(10, [](int64_t i) { if (i == 4) throw std::runtime_error("task 4"); }), std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.run(10, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 45);
}

TEST(ThreadPool, DefaultsToTheHardwareThreads) {
  ThreadPool pool(0);
  EXPECT_GE(pool.threads(), 1);
}

}  // namespace
}  // namespace shardlm
