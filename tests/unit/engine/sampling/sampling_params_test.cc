#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace tandem::sampling {
namespace {

constexpr int32_t kVocab = 1000;

// Succeeds when validation fails with InvalidArgument whose message contains
// every fragment.
::testing::AssertionResult IsInvalid(const SamplingParams& p,
                                     std::initializer_list<std::string> fragments) {
  absl::Status s = ValidateSamplingParams(p, kVocab);
  if (s.code() != absl::StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "expected InvalidArgument, got " << s;
  }
  for (const std::string& f : fragments) {
    if (s.message().find(f) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << s.message() << "\" lacks \"" << f << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(SamplingParamsTest, DefaultsAndEdgesAreValid) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok());
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = 20;
  p.n = 128;
  p.stop_token_ids = {0, kVocab - 1};
  p.stop = {"\n\n", "é"};
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok()) << ValidateSamplingParams(p, kVocab);
  p.top_k = 5000;  // larger than the vocabulary: simply no truncation
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok());
}

TEST(SamplingParamsTest, Temperature) {
  SamplingParams p;
  p.temperature = -0.5f;
  EXPECT_TRUE(IsInvalid(p, {"temperature -0.5 is out of range", ">= 0"}));
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(IsInvalid(p, {"temperature nan", ">= 0"}));
  p.temperature = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(IsInvalid(p, {"temperature inf", "finite"}));
}

TEST(SamplingParamsTest, TopP) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_TRUE(IsInvalid(p, {"top_p 0 is out of range", "(0, 1]"}));
  p.top_p = 1.5f;
  EXPECT_TRUE(IsInvalid(p, {"top_p 1.5", "(0, 1]"}));
  p.top_p = std::nanf("");
  EXPECT_TRUE(IsInvalid(p, {"top_p nan", "(0, 1]"}));
}

TEST(SamplingParamsTest, TopK) {
  SamplingParams p;
  p.top_k = -2;
  EXPECT_TRUE(IsInvalid(p, {"top_k -2 is out of range", ">= -1"}));
}

TEST(SamplingParamsTest, MinP) {
  SamplingParams p;
  p.min_p = -0.1f;
  EXPECT_TRUE(IsInvalid(p, {"min_p -0.1", "[0, 1]"}));
  p.min_p = 1.01f;
  EXPECT_TRUE(IsInvalid(p, {"min_p 1.01", "[0, 1]"}));
  p.min_p = std::nanf("");
  EXPECT_TRUE(IsInvalid(p, {"min_p nan", "[0, 1]"}));
}

TEST(SamplingParamsTest, Penalties) {
  SamplingParams p;
  p.repetition_penalty = 0.0f;
  EXPECT_TRUE(IsInvalid(p, {"repetition_penalty 0", "> 0"}));
  p.repetition_penalty = std::nanf("");
  EXPECT_TRUE(IsInvalid(p, {"repetition_penalty nan", "> 0"}));
  p = SamplingParams();
  p.presence_penalty = 2.5f;
  EXPECT_TRUE(IsInvalid(p, {"presence_penalty 2.5", "[-2, 2]"}));
  p = SamplingParams();
  p.frequency_penalty = -3.0f;
  EXPECT_TRUE(IsInvalid(p, {"frequency_penalty -3", "[-2, 2]"}));
  p.frequency_penalty = std::nanf("");
  EXPECT_TRUE(IsInvalid(p, {"frequency_penalty nan", "[-2, 2]"}));
}

TEST(SamplingParamsTest, TokenCounts) {
  SamplingParams p;
  p.max_tokens = 0;
  EXPECT_TRUE(IsInvalid(p, {"max_tokens 0 is out of range", ">= 1"}));
  p = SamplingParams();
  p.max_tokens = 10;
  p.min_tokens = 11;
  EXPECT_TRUE(IsInvalid(p, {"min_tokens 11", "[0, 10]"}));
  p.min_tokens = -1;
  EXPECT_TRUE(IsInvalid(p, {"min_tokens -1", "[0, 10]"}));
}

TEST(SamplingParamsTest, LogprobsAndN) {
  SamplingParams p;
  p.logprobs = 21;
  EXPECT_TRUE(IsInvalid(p, {"logprobs 21", "[0, 20]"}));
  p.logprobs = -1;
  EXPECT_TRUE(IsInvalid(p, {"logprobs -1", "[0, 20]"}));
  p = SamplingParams();
  p.prompt_logprobs = 21;
  EXPECT_TRUE(IsInvalid(p, {"prompt_logprobs 21", "[0, 20]"}));
  p.prompt_logprobs = -2;
  EXPECT_TRUE(IsInvalid(p, {"prompt_logprobs -2", "-1 (none)"}));
  p = SamplingParams();
  p.n = 0;
  EXPECT_TRUE(IsInvalid(p, {"n 0 is out of range", "[1, 128]"}));
  p.n = 129;
  EXPECT_TRUE(IsInvalid(p, {"n 129", "[1, 128]"}));
}

TEST(SamplingParamsTest, StopTokenIds) {
  SamplingParams p;
  p.stop_token_ids = {5, kVocab};
  EXPECT_TRUE(IsInvalid(p, {"stop_token_ids[1] 1000 is out of range", "[0, 1000)"}));
  p.stop_token_ids = {-3};
  EXPECT_TRUE(IsInvalid(p, {"stop_token_ids[0] -3", "[0, 1000)"}));
  p.stop_token_ids.assign(kMaxStopTokenIds, 7);
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok());
  p.stop_token_ids.push_back(7);
  EXPECT_TRUE(IsInvalid(p, {"stop_token_ids has 1025 ids", "at most 1024"}));
}

TEST(SamplingParamsTest, StopStrings) {
  SamplingParams p;
  p.stop = {"ok", ""};
  EXPECT_TRUE(IsInvalid(p, {"stop[1] is empty"}));
  p.stop = {std::string("a\xC3", 2)};  // truncated 2-byte sequence
  EXPECT_TRUE(IsInvalid(p, {"stop[0] is not valid UTF-8 at byte 1"}));
  p.stop = {std::string("\xC0\xAF")};  // overlong '/'
  EXPECT_TRUE(IsInvalid(p, {"stop[0] is not valid UTF-8 at byte 0"}));
}

TEST(SamplingParamsTest, StopStringsAreBoundedInNumberAndLength) {
  SamplingParams p;
  p.stop.assign(kMaxStopStrings, std::string(kMaxStopStringBytes, 'x'));
  EXPECT_TRUE(ValidateSamplingParams(p, kVocab).ok());
  p.stop.push_back("y");
  EXPECT_TRUE(IsInvalid(p, {"stop has 65 strings", "at most 64"}));
  p.stop = {"ok", std::string(kMaxStopStringBytes + 1, 'x')};
  EXPECT_TRUE(IsInvalid(p, {"stop[1] has 4097 bytes", "at most 4096"}));
  // The request: one 3.5 MB stop string.
  p.stop = {std::string(3500000, 'x')};
  EXPECT_TRUE(IsInvalid(p, {"stop[0] has 3500000 bytes"}));
}

}  // namespace
}  // namespace tandem::sampling
