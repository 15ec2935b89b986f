// The response pieces of the OpenAI API that need no tokenizer: finish
// reasons, usage, and the concatenation of legacy logprobs (echo's prompt
// part followed by the generated part).
#include "coordinator/http/openai_response.h"

#include "gtest/gtest.h"

namespace tandem::coordinator::http {
namespace {

using nlohmann::json;

json Legacy(json tokens, json logprobs, json top, json offsets) {
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", top},
          {"text_offset", offsets}};
}

TEST(OpenAiResponseTest, FinishReasonsAndUsage) {
  EXPECT_EQ(FinishReasonJson(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonJson(FinishReason::kLength), "length");
  EXPECT_TRUE(FinishReasonJson(FinishReason::kNone).is_null());
  EXPECT_EQ(UsageJson(5, 3), (json{{"prompt_tokens", 5}, {"completion_tokens", 3},
                                   {"total_tokens", 8}}));
}

TEST(OpenAiResponseTest, AppendLogprobsConcatenatesEveryArray) {
  json echo = Legacy({"The", " cat"}, {nullptr, -1.5}, {nullptr, {{" cat", -1.5}}}, {0, 3});
  AppendLogprobs(echo, Legacy({" sat"}, {-0.5}, {{{" sat", -0.5}}}, {7}));
  EXPECT_EQ(echo["tokens"], (json{"The", " cat", " sat"}));
  EXPECT_EQ(echo["token_logprobs"], (json{nullptr, -1.5, -0.5}));
  EXPECT_EQ(echo["text_offset"], (json{0, 3, 7}));
  EXPECT_EQ(echo["top_logprobs"].size(), 3u);
  json none = nullptr;
  AppendLogprobs(none, Legacy({"a"}, {-1.0}, {json::object()}, {0}));
  EXPECT_EQ(none["tokens"], json{"a"});
  json kept = Legacy({"a"}, {-1.0}, {json::object()}, {0});
  AppendLogprobs(kept, nullptr);
  EXPECT_EQ(kept["tokens"], json{"a"});
}

}  // namespace
}  // namespace tandem::coordinator::http
