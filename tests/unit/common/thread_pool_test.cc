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

// Jobs whose chunk count alternates small and large, on more threads than
// cores: a worker late from one job must not claim a chunk of the next one
// (it once could, past the old job's end, and ran that chunk twice — seen as
// crashes on a 16-core machine and by ThreadSanitizer). Every index of every
// job runs exactly once, and nothing runs after ParallelFor returned.
TEST(ThreadPoolTest, GrowingChunkCountsAreClaimedOnce) {
  ThreadPool pool(8);
  std::atomic<int64_t> live_round{-1};
  for (int round = 0; round < 20000; ++round) {
    const int64_t n = round % 2 == 0 ? 2 : 8;
    std::vector<std::atomic<int>> hits(n);
    live_round.store(round);
    pool.ParallelFor(n, 1, [&, round](int, int64_t begin, int64_t end) {
      ASSERT_EQ(live_round.load(), round) << "a chunk ran after its ParallelFor returned";
      for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
    });
    live_round.store(-1);
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
