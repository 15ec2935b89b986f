// Request migration through WorkerGroupPool and its scheduler threads: a
// group that fails a step sends its requests to the group the router picks,
// where they finish with the tokens of an unfailed run; a request that keeps
// failing stops after --max-migrations with UNAVAILABLE; cancels from other
// threads race migrations without losing a request or a KV block. Real
// in-process replicas of the default model; runs under TSan in CI.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "coordinator/cluster/worker_group_pool.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/cluster/pool_test_util.h"

namespace tandem::coordinator {
namespace {

class RequestMigrationTest : public PoolTokenizerTest {
 protected:
  // A pool with migration (`max_migrations`, 2 s each) and one group per
  // entry of `fails` (nullptr: never fails).
  std::unique_ptr<WorkerGroupPool> MakePool(int32_t max_migrations,
                                            std::vector<std::function<bool(int)>> fails) {
    RouterConfig router;
    router.block_size = 16;
    auto pool = std::make_unique<WorkerGroupPool>(
        SchedulerConfig{}, router, tokenizer_, &finished_,
        [](const std::string&, absl::Duration) -> absl::StatusOr<WorkerGroupPool::Connected> {
          return absl::UnavailableError("no discovery in this test");
        });
    CHECK(pool->set_migration(max_migrations, absl::Seconds(2)).ok());
    for (size_t i = 0; i < fails.size(); ++i) {
      auto g = OwnedLocalGroup::Create(16);
      CHECK(g.ok(), "%s", g.status().ToString());
      std::unique_ptr<WorkerGroup> group = *std::move(g);
      if (fails[i]) group = std::make_unique<FailingGroup>(std::move(group), fails[i]);
      CHECK(pool->Add(absl::StrCat("g", i), WorkerGroupPool::Connected{std::move(group)}).ok());
    }
    return pool;
  }

  static GenerateRequest Request(int64_t id, int32_t max_tokens) {
    GenerateRequest r;
    r.id = RequestId(id);
    for (int32_t i = 0; i < 20; ++i) r.prompt_tokens.push_back(100 + 7 * i + static_cast<int32_t>(id % 5));
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.temperature = id % 2 == 0 ? 0.0f : 0.8f;
    r.params.seed = 500 + id % 5;
    return r;
  }

  static void Submit(WorkerGroupPool& pool, GenerateRequest r) {
    auto group = pool.Route(r.prompt_tokens);
    ASSERT_TRUE(group.ok()) << group.status();
    ASSERT_TRUE(pool.Submit(*group, std::move(r)).ok());
  }

  static int64_t Total(const WorkerGroupPool& pool, int64_t SchedulerLoop::Snapshot::*field) {
    int64_t total = 0;
    for (const auto& s : pool.Statuses()) total += s.stats.*field;
    return total;
  }

  // Every group idle with no KV block in use, as its loop publishes after
  // its last step (bounded wait).
  static void ExpectIdle(const WorkerGroupPool& pool) {
    auto idle = [&] {
      for (const auto& s : pool.Statuses()) {
        if (s.load != 0 || s.stats.kv.num_blocks_used != 0) return false;
      }
      return true;
    };
    for (int i = 0; i < 500 && !idle(); ++i) absl::SleepFor(absl::Milliseconds(10));
    for (const auto& s : pool.Statuses()) {
      EXPECT_EQ(s.load, 0) << s.name;
      EXPECT_EQ(s.stats.kv.num_blocks_used, 0) << s.name << ": blocks leaked";
    }
  }

  Finished finished_;
};

TEST_F(RequestMigrationTest, AFailedGroupsRequestsFinishWithTheTokensOfAnUnfailedRun) {
  // g0 fails its 4th and 9th steps; g1 never fails.
  auto pool = MakePool(3, {[](int n) { return n == 4 || n == 9; }, nullptr});
  constexpr int kRequests = 10;
  for (int64_t id = 1; id <= kRequests; ++id) Submit(*pool, Request(id, 24));
  for (int64_t id = 1; id <= kRequests; ++id) ASSERT_TRUE(finished_.Wait(id)) << id;
  // The same requests again (ids + 100, same prompts and seeds): no failure
  // is left to inject, so these are the unfailed run.
  for (int64_t id = 1; id <= kRequests; ++id) {
    GenerateRequest r = Request(id, 24);
    r.id = RequestId(id + 100);
    Submit(*pool, std::move(r));
  }
  int32_t moved = 0;
  for (int64_t id = 1; id <= kRequests; ++id) {
    ASSERT_TRUE(finished_.Wait(id + 100)) << id;
    const RequestOutput got = finished_.Get(id);
    const RequestOutput want = finished_.Get(id + 100);
    ASSERT_TRUE(got.status.ok()) << got.status;
    EXPECT_EQ(got.completions[0].token_ids, want.completions[0].token_ids) << "request " << id;
    EXPECT_EQ(got.completions[0].text, want.completions[0].text) << "request " << id;
    moved += got.num_migrations;
  }
  EXPECT_GT(moved, 0) << "no request ran on the failing group";
  EXPECT_EQ(Total(*pool, &SchedulerLoop::Snapshot::num_migrations), moved);
  EXPECT_EQ(Total(*pool, &SchedulerLoop::Snapshot::num_migration_failures), 0);
  ExpectIdle(*pool);
}

TEST_F(RequestMigrationTest, ARequestThatKeepsFailingStopsAfterMaxMigrations) {
  auto pool = MakePool(2, {[](int) { return true; }});
  Submit(*pool, Request(1, 8));
  ASSERT_TRUE(finished_.Wait(1));
  const RequestOutput out = finished_.Get(1);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable) << out.status;
  EXPECT_NE(out.status.message().find("3 worker groups failed while it ran there"),
            std::string::npos)
      << out.status;
  EXPECT_NE(out.status.message().find("more than --max-migrations 2"), std::string::npos)
      << out.status;
  EXPECT_EQ(out.num_migrations, 2);
  EXPECT_EQ(out.completions[0].finish_reason, FinishReason::kError);
  EXPECT_EQ(Total(*pool, &SchedulerLoop::Snapshot::num_migration_failures), 1);
  ExpectIdle(*pool);
}

TEST_F(RequestMigrationTest, MigrationOffFailsTheStepsRequests) {
  auto pool = MakePool(0, {[](int n) { return n == 2; }});
  Submit(*pool, Request(1, 8));
  ASSERT_TRUE(finished_.Wait(1));
  const RequestOutput out = finished_.Get(1);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable) << out.status;
  EXPECT_EQ(out.num_migrations, 0);
}

TEST_F(RequestMigrationTest, CancelsRaceMigrationsWithoutLosingARequest) {
  // Both groups fail every third step, so requests keep moving while
  // another thread cancels half of them.
  auto every_third = [](int n) { return n % 3 == 0; };
  auto pool = MakePool(100, {every_third, every_third});
  constexpr int kRequests = 8;
  for (int64_t id = 1; id <= kRequests; ++id) Submit(*pool, Request(id, 16));
  std::thread canceller([&] {
    for (int64_t id = 1; id <= kRequests; id += 2) {
      pool->Cancel(RequestId(id));
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  canceller.join();
  for (int64_t id = 1; id <= kRequests; ++id) {
    ASSERT_TRUE(finished_.Wait(id)) << "request " << id << " was lost";
    const RequestOutput out = finished_.Get(id);
    EXPECT_TRUE(out.status.ok()) << out.status;
    const FinishReason reason = out.completions[0].finish_reason;
    if (id % 2 == 0) {
      EXPECT_EQ(reason, FinishReason::kLength) << "request " << id;
    } else {
      EXPECT_TRUE(reason == FinishReason::kCancelled || reason == FinishReason::kLength)
          << "request " << id << ": " << FinishReasonName(reason);
    }
    pool->Forget(RequestId(id));
  }
  EXPECT_GT(Total(*pool, &SchedulerLoop::Snapshot::num_migrations), 0);
  ExpectIdle(*pool);
}

}  // namespace
}  // namespace tandem::coordinator
