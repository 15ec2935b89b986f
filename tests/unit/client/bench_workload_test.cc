#include "client/bench_workload.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tandem::client {
namespace {

RandomWorkload Small() {
  return {.num_requests = 5, .input_len = 16, .output_len = 4, .shared_prefix_len = 6,
          .vocab_size = 1000, .seed = 3};
}

TEST(BenchWorkloadTest, RandomPromptsShareThePrefixAndStayInRange) {
  absl::StatusOr<std::vector<JsonRequest>> r = RandomRequests(Small());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 5u);
  const std::vector<int32_t>& first = *(*r)[0].prompt_token_ids;
  bool suffixes_differ = false;
  for (const JsonRequest& q : *r) {
    const std::vector<int32_t>& ids = *q.prompt_token_ids;
    ASSERT_EQ(ids.size(), 16u);
    for (int32_t id : ids) {
      EXPECT_GE(id, kMinRandomTokenId);
      EXPECT_LT(id, 1000);
    }
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + 6, first.begin()));
    if (!std::equal(ids.begin() + 6, ids.end(), first.begin() + 6)) suffixes_differ = true;
    EXPECT_EQ(q.params.max_tokens, 4);
    EXPECT_TRUE(q.params.ignore_eos);
    EXPECT_EQ(q.params.temperature, 0);
  }
  EXPECT_TRUE(suffixes_differ);
}

TEST(BenchWorkloadTest, RandomPromptsAreDeterministicInSeed) {
  auto a = RandomRequests(Small());
  auto b = RandomRequests(Small());
  RandomWorkload other = Small();
  other.seed = 4;
  auto c = RandomRequests(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*(*a)[2].prompt_token_ids, *(*b)[2].prompt_token_ids);
  EXPECT_NE(*(*a)[2].prompt_token_ids, *(*c)[2].prompt_token_ids);
}

TEST(BenchWorkloadTest, RandomRejectsBadFieldsNamingThem) {
  RandomWorkload w = Small();
  w.shared_prefix_len = 17;
  absl::StatusOr<std::vector<JsonRequest>> r = RandomRequests(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shared_prefix_len 17"), std::string::npos);
  w = Small();
  w.vocab_size = 50;
  r = RandomRequests(w);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vocab_size 50"), std::string::npos);
}

TEST(BenchWorkloadTest, DatasetIsCycledToNumRequests) {
  const std::string path = ::testing::TempDir() + "/bench_workload_test.jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt": "hello"})" << "\n\n" << R"({"prompt_token_ids": [5, 6], "max_tokens": 3})"
      << "\n";
  }
  absl::StatusOr<std::vector<JsonRequest>> r = DatasetRequests(path, 5, 9);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 5u);
  EXPECT_EQ(*(*r)[0].prompt, "hello");
  EXPECT_EQ((*r)[0].params.max_tokens, 9);
  EXPECT_EQ((*r)[0].params.temperature, 0);
  EXPECT_EQ((*r)[1].params.max_tokens, 3);
  EXPECT_EQ(*(*r)[4].prompt, "hello");
  std::remove(path.c_str());
}

TEST(BenchWorkloadTest, DatasetErrorsNameFileAndLine) {
  const std::string path = ::testing::TempDir() + "/bench_workload_bad.jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt": "x"})" << "\n" << R"({"bogus": 1})" << "\n";
  }
  absl::StatusOr<std::vector<JsonRequest>> r = DatasetRequests(path, 2, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status();
  std::remove(path.c_str());
  r = DatasetRequests("/nonexistent/x.jsonl", 2, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/x.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace tandem::client
