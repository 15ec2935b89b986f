#include "common/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ThreadPoolTest, CoversRangeExactlyOnceManyTimes) {
  ThreadPool pool(2);
  for (int round = 0; round < 2000; ++round) {
    int64_t n = 1 + round % 97;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 1, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round << " i " << i;
  }
}

TEST(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  int64_t total = 0;
  pool.ParallelFor(10, 1, [&](int t, int64_t b, int64_t e) {
    EXPECT_EQ(t, 0);
    total += e - b;
  });
  EXPECT_EQ(total, 10);
}

}  // namespace
}  // namespace tandem
