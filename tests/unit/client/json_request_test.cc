#include "client/json_request.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem::client {
namespace {

absl::StatusOr<JsonRequest> Parse(const std::string& line) {
  return ParseJsonRequest(line, sampling::SamplingParams{});
}

TEST(JsonRequestTest, ReadsIntegerFields) {
  auto r = Parse(R"({"prompt": "x", "max_tokens": 16, "top_k": -1, "priority": -3,
                     "stop_token_ids": [2, 2147483647]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->params.max_tokens, 16);
  EXPECT_EQ(r->params.top_k, -1);
  EXPECT_EQ(r->priority, -3);
  EXPECT_EQ(r->params.stop_token_ids, (std::vector<int32_t>{2, 2147483647}));
}

// Found by jsonl_request_fuzz: nlohmann stores integers past INT64_MAX as
// uint64, and reading them as int64 wrapped 18446744073709551615 to -1, so
// "top_k": 18446744073709551615 silently turned top-k off.
TEST(JsonRequestTest, RejectsIntegersPastInt64InsteadOfWrapping) {
  for (const char* field : {"max_tokens", "top_k", "priority", "n", "num_beams"}) {
    auto r = Parse(std::string(R"({"prompt": "x", ")") + field +
                   R"(": 18446744073709551615})");
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("18446744073709551615"), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("32 bits"), std::string::npos) << r.status();
  }
}

TEST(JsonRequestTest, RejectsTokenIdsPastInt64InsteadOfWrapping) {
  for (const char* line : {R"({"prompt_token_ids": [1, 18446744073709551615]})",
                           R"({"prompt": "x", "stop_token_ids": [18446744069414584320]})",
                           R"({"prompt_token_ids": [2147483648]})"}) {
    auto r = Parse(line);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("does not fit in 32 bits"), std::string::npos)
        << r.status();
  }
  auto r = Parse(R"({"prompt_token_ids": [18446744073709551615]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("18446744073709551615"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tandem::client
