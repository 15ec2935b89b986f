// Router: affinity, load, round-robin ties, unhealthy groups, no groups,
// groups that come and go.
#include "coordinator/cluster/router.h"

#include <numeric>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

RouterConfig Config(int64_t max_extra_load = 4) {
  RouterConfig c;
  c.block_size = 4;
  c.max_keys_per_group = 64;
  c.affinity_max_extra_load = max_extra_load;
  return c;
}

// Groups with ids 0..n-1 (so a chosen id is also the index), equal loads.
std::vector<GroupLoad> Groups(int n) {
  std::vector<GroupLoad> groups(n);
  for (int i = 0; i < n; ++i) {
    groups[i].id = i;
    groups[i].name = "group" + std::to_string(i);
  }
  return groups;
}

// Groups with ids 0.. and these loads.
std::vector<GroupLoad> Loaded(std::vector<int64_t> loads) {
  std::vector<GroupLoad> groups = Groups(static_cast<int>(loads.size()));
  for (size_t i = 0; i < loads.size(); ++i) groups[i].load = loads[i];
  return groups;
}

std::vector<int32_t> Prompt(int32_t first, int32_t length) {
  std::vector<int32_t> p(length);
  std::iota(p.begin(), p.end(), first);
  return p;
}

TEST(RouterTest, AffinityWinsWhenLoadsAreEqual) {
  Router router(Config());
  const std::vector<int32_t> shared = Prompt(100, 16);
  std::vector<GroupLoad> loads = Groups(3);
  absl::StatusOr<int64_t> first = router.Choose(shared, loads);
  ASSERT_TRUE(first.ok()) << first.status();
  // Round-robin would move on; the shared prefix keeps it on the same group.
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = shared;
    p.push_back(1000 + i);  // a different suffix, same leading blocks
    absl::StatusOr<int64_t> g = router.Choose(p, loads);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(*g, *first) << "request " << i;
  }
}

TEST(RouterTest, LongestLeadingMatchWins) {
  Router router(Config(/*max_extra_load=*/4));
  std::vector<GroupLoad> equal = Groups(2);
  // The 1-block prefix goes to group 0 (no affinity yet: round-robin start).
  ASSERT_EQ(*router.Choose(Prompt(0, 4), equal), 0);
  // Group 0 overloaded: the 3-block prompt sharing that block goes to 1.
  std::vector<GroupLoad> busy0 = Loaded({100, 0});
  ASSERT_EQ(*router.Choose(Prompt(0, 12), busy0), 1);
  // Both hold the first block; group 1 holds three: it wins.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*router.Choose(Prompt(0, 14), equal), 1);
  // A prompt matching only the first block ties at 1 block: the less loaded.
  std::vector<GroupLoad> busy1 = Loaded({0, 1});
  EXPECT_EQ(*router.Choose(Prompt(0, 5), busy1), 0);
}

TEST(RouterTest, LoadWinsWhenTheAffineGroupIsOverloaded) {
  Router router(Config(/*max_extra_load=*/4));
  const std::vector<int32_t> shared = Prompt(100, 16);
  std::vector<GroupLoad> loads = Groups(2);
  absl::StatusOr<int64_t> affine = router.Choose(shared, loads);
  ASSERT_TRUE(affine.ok());
  const int64_t other = 1 - *affine;
  // Within the threshold the prefix still wins ...
  loads[*affine].load = 4;
  EXPECT_EQ(*router.Choose(shared, loads), *affine);
  // ... beyond it the less loaded group takes the request.
  loads[*affine].load = 5;
  EXPECT_EQ(*router.Choose(shared, loads), other);
}

TEST(RouterTest, TiesSpreadRoundRobin) {
  Router router(Config());
  std::vector<GroupLoad> loads = Groups(3);
  std::vector<int64_t> chosen;
  for (int i = 0; i < 6; ++i) {
    // Prompts shorter than a block carry no affinity.
    absl::StatusOr<int64_t> g = router.Choose(Prompt(10 * i, 3), loads);
    ASSERT_TRUE(g.ok());
    chosen.push_back(*g);
  }
  EXPECT_EQ(chosen, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  // Distinct full-block prompts spread as well.
  std::set<int64_t> seen;
  for (int i = 0; i < 3; ++i) seen.insert(*router.Choose(Prompt(500 + 50 * i, 8), loads));
  EXPECT_EQ(seen.size(), 3u);
}

TEST(RouterTest, LeastLoadedWinsWithoutAffinity) {
  Router router(Config());
  std::vector<GroupLoad> loads = Loaded({5, 2, 3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*router.Choose(Prompt(0, 2), loads), 1);
}

TEST(RouterTest, UnhealthyGroupsAreNeverChosen) {
  Router router(Config());
  const std::vector<int32_t> shared = Prompt(100, 16);
  std::vector<GroupLoad> loads = Groups(3);
  absl::StatusOr<int64_t> affine = router.Choose(shared, loads);
  ASSERT_TRUE(affine.ok());
  loads[*affine].healthy = false;  // least loaded and affine, but down
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<int64_t> g = router.Choose(i % 2 ? shared : Prompt(7 * i, 5), loads);
    ASSERT_TRUE(g.ok());
    EXPECT_NE(*g, *affine);
  }
}

// A suspect group (its step overdue) gets nothing while another is clear,
// keeps its affinity, and still serves when it is the only healthy one.
TEST(RouterTest, SuspectGroupsAreChosenOnlyWhenNoOtherIsClear) {
  Router router(Config());
  const std::vector<int32_t> shared = Prompt(100, 16);
  std::vector<GroupLoad> loads = Groups(3);
  absl::StatusOr<int64_t> affine = router.Choose(shared, loads);
  ASSERT_TRUE(affine.ok());
  loads[*affine].suspect = true;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<int64_t> g = router.Choose(i % 2 ? shared : Prompt(7 * i, 5), loads);
    ASSERT_TRUE(g.ok());
    EXPECT_NE(*g, *affine);
  }
  for (GroupLoad& g : loads) g.suspect = g.id == *affine || g.id == (*affine + 1) % 3;
  loads[(*affine + 2) % 3].healthy = false;
  absl::StatusOr<int64_t> g = router.Choose(shared, loads);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, *affine) << "every healthy group suspect: the affine one still serves";
}

TEST(RouterTest, AllGroupsDownIsUnavailableNamingThem) {
  Router router(Config());
  std::vector<GroupLoad> loads = Groups(2);
  loads[0].name = "127.0.0.1:5001";
  loads[1].name = "127.0.0.1:5002";
  for (GroupLoad& g : loads) g.healthy = false;
  absl::StatusOr<int64_t> g = router.Choose(Prompt(0, 8), loads);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(g.status().message().find("127.0.0.1:5001"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("127.0.0.1:5002"), std::string::npos) << g.status();
}

TEST(RouterTest, NoGroupsIsUnavailable) {
  Router router(Config());
  absl::StatusOr<int64_t> g = router.Choose(Prompt(0, 8), {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable);
}

TEST(RouterTest, AffinityIsBoundedPerGroup) {
  RouterConfig config = Config();
  config.max_keys_per_group = 2;
  Router router(config);
  std::vector<GroupLoad> loads = Groups(2);
  const std::vector<int32_t> first = Prompt(0, 8);  // 2 blocks
  absl::StatusOr<int64_t> g = router.Choose(first, loads);
  ASSERT_TRUE(g.ok());
  // Force 2 other prompts' blocks onto the same group: they evict `first`'s.
  std::vector<GroupLoad> only_g = Groups(2);
  only_g[1 - *g].healthy = false;
  ASSERT_TRUE(router.Choose(Prompt(300, 8), only_g).ok());
  // `first` has no affinity left: the least loaded group wins.
  loads[*g].load = 1;
  EXPECT_EQ(*router.Choose(first, loads), 1 - *g);
}

TEST(RouterTest, GroupsComeAndGo) {
  Router router(Config());
  const std::vector<int32_t> shared = Prompt(100, 16);
  std::vector<GroupLoad> loads = Groups(2);
  absl::StatusOr<int64_t> affine = router.Choose(shared, loads);
  ASSERT_TRUE(affine.ok());
  // The affine group is removed: the request goes to the one left, and a
  // group added later (a fresh id) is used.
  router.Forget(*affine);
  std::vector<GroupLoad> left = {loads[1 - *affine]};
  EXPECT_EQ(*router.Choose(shared, left), 1 - *affine);
  GroupLoad added;
  added.id = 7;
  added.name = "new";
  left[0].load = 3;
  left.push_back(added);
  EXPECT_EQ(*router.Choose(Prompt(900, 8), left), 7);
  // The surviving group now holds `shared`'s blocks; affinity follows it.
  left[0].load = 0;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*router.Choose(shared, left), 1 - *affine);
}

TEST(RouterTest, InvalidConfigNamesTheValue) {
  RouterConfig config = Config();
  config.block_size = 0;
  absl::Status s = ValidateRouterConfig(config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("block_size 0"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::coordinator
