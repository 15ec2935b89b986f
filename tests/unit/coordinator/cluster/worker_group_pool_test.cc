// WorkerGroupPool: groups join and leave under traffic as discovery reports
// addresses. Each "address" here is a real in-process replica (its own copy
// of the default model behind a LocalWorkerGroup), so requests really run.
#include "coordinator/cluster/worker_group_pool.h"

#include <map>
#include <memory>
#include <set>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "gtest/gtest.h"
#include "tests/unit/coordinator/cluster/pool_test_util.h"
#include "tests/unit/engine/model/model_test_util.h"

namespace tandem::coordinator {
namespace {

class WorkerGroupPoolTest : public PoolTokenizerTest {
 protected:
  // A pool whose connector makes a replica for any address except those in
  // `unreachable_` (UNAVAILABLE) and "odd-block" (block size 8: a different
  // geometry). Counts connect attempts per address.
  std::unique_ptr<WorkerGroupPool> MakePool() {
    RouterConfig router;
    router.block_size = 16;
    return std::make_unique<WorkerGroupPool>(
        SchedulerConfig{}, router, tokenizer_, &finished_,
        [this](const std::string& address,
               absl::Duration) -> absl::StatusOr<WorkerGroupPool::Connected> {
          ++connects_[address];
          if (unreachable_.contains(address)) {
            return absl::UnavailableError(address + " is unreachable");
          }
          auto g = OwnedLocalGroup::Create(address == "odd-block" ? 8 : 16);
          if (!g.ok()) return g.status();
          return WorkerGroupPool::Connected{*std::move(g), nullptr};
        });
  }

  GenerateRequest Request(int64_t id, int32_t max_tokens, int32_t first_token = 100) {
    GenerateRequest r;
    r.id = RequestId(id);
    for (int32_t i = 0; i < 20; ++i) r.prompt_tokens.push_back(first_token + i);
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    return r;
  }

  static std::set<std::string> Names(const WorkerGroupPool& pool) {
    std::set<std::string> names;
    for (const auto& s : pool.Statuses()) names.insert(s.name);
    return names;
  }

  Finished finished_;
  std::map<std::string, int> connects_;
  std::set<std::string> unreachable_;
};

TEST_F(WorkerGroupPoolTest, NoGroupsIsUnavailable) {
  auto pool = MakePool();
  absl::StatusOr<std::shared_ptr<WorkerGroupEntry>> g = pool->Route(Request(1, 1).prompt_tokens);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
  EXPECT_FALSE(pool->info().has_value());
}

TEST_F(WorkerGroupPoolTest, ReconcileAddsRetriesAndRejectsMismatchedGroups) {
  auto pool = MakePool();
  unreachable_ = {"c"};
  pool->Reconcile({"a", "b", "c", "odd-block"}, absl::Seconds(1));
  EXPECT_EQ(Names(*pool), (std::set<std::string>{"a", "b"}));
  ASSERT_TRUE(pool->info().has_value());
  EXPECT_EQ(pool->info()->block_size, 16);
  // "c" comes up: the next round connects it; "a" and "b" are not reconnected.
  unreachable_.clear();
  pool->Reconcile({"a", "b", "c", "odd-block"}, absl::Seconds(1));
  EXPECT_EQ(Names(*pool), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_EQ(connects_["a"], 1);
  EXPECT_EQ(connects_["c"], 2);
  EXPECT_EQ(connects_["odd-block"], 2);  // still rejected, still retried
}

TEST_F(WorkerGroupPoolTest, RequestsSpreadOverGroupsAndComplete) {
  auto pool = MakePool();
  pool->Reconcile({"a", "b"}, absl::Seconds(1));
  std::set<std::string> used;
  std::vector<std::shared_ptr<WorkerGroupEntry>> held;
  for (int64_t id = 1; id <= 4; ++id) {
    GenerateRequest r = Request(id, 4, /*first_token=*/100 * static_cast<int32_t>(id));
    auto g = pool->Route(r.prompt_tokens);
    ASSERT_TRUE(g.ok()) << g.status();
    used.insert((*g)->name);
    ASSERT_TRUE((*g)->loop->Submit(r).ok());
    held.push_back(*g);
  }
  EXPECT_EQ(used, (std::set<std::string>{"a", "b"}));
  for (int64_t id = 1; id <= 4; ++id) EXPECT_TRUE(finished_.Wait(id)) << "request " << id;
}

TEST_F(WorkerGroupPoolTest, AGroupThatDisappearsDrainsThenLeavesAndMayReturn) {
  auto pool = MakePool();
  pool->Reconcile({"a", "b"}, absl::Seconds(1));
  // Pin a long request on whichever group Route picks.
  GenerateRequest r = Request(1, 64);
  auto g = pool->Route(r.prompt_tokens);
  ASSERT_TRUE(g.ok());
  const std::string busy = (*g)->name;
  const std::string other = busy == "a" ? "b" : "a";
  ASSERT_TRUE((*g)->loop->Submit(r).ok());
  // Discovery drops the busy group: it drains (still listed, takes nothing).
  pool->Reconcile({other}, absl::Seconds(1));
  bool seen_draining = false;
  for (const auto& s : pool->Statuses()) {
    if (s.name == busy && s.draining) seen_draining = true;
  }
  // The request may already have finished on a fast machine; then the group
  // is gone at once. Either way nothing new is routed to it.
  if (seen_draining) {
    for (int i = 0; i < 5; ++i) {
      auto next = pool->Route(Request(100 + i, 1, 500 + i).prompt_tokens);
      ASSERT_TRUE(next.ok());
      EXPECT_EQ((*next)->name, other);
    }
  }
  // The in-flight request completes; the next round removes the group.
  ASSERT_TRUE(finished_.Wait(1));
  g->reset();
  pool->Reconcile({other}, absl::Seconds(1));
  EXPECT_EQ(Names(*pool), (std::set<std::string>{other}));
  // It comes back: connected afresh and used again.
  pool->Reconcile({"a", "b"}, absl::Seconds(1));
  EXPECT_EQ(Names(*pool), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(connects_[busy], 2);
}

}  // namespace
}  // namespace tandem::coordinator
