// StepResultToProto / StepResultFromProto: a result with every part (sampled
// tokens with alternatives, accepted drafts, beam candidates, prompt
// logprobs) survives the wire unchanged; tokens outside the vocabulary and
// a prompt position below 1 are refused, naming them. SamplingParams carry
// prompt_logprobs only when asked for.
#include "protocol/step_result_codec.h"

#include <string>

#include "gtest/gtest.h"
#include "protocol/sampling_codec.h"

namespace tandem::protocol {
namespace {

constexpr int32_t kVocab = 100;

worker::StepResult FullResult() {
  worker::StepResult r;
  r.step_id = 9;
  worker::SequenceResult& s = r.results.emplace_back();
  s.id = SeqId(3);
  s.sample = {7, -0.5f, {{7, -0.5f}, {8, -1.5f}}, {}};
  s.accepted_drafts.push_back({4, -0.25f, {{4, -0.25f}}, {}});
  worker::SequenceResult& beam = r.results.emplace_back();
  beam.id = SeqId(4);
  beam.sample.token = 5;
  beam.sample.beam_candidates = {{5, -0.1f, -0.1f}, {6, -2.0f, -1.0f}};
  worker::PromptLogprobs& p = r.prompt_logprobs.emplace_back();
  p.id = SeqId(3);
  p.first_position = 17;
  p.tokens.push_back({11, -3.0f, {{12, -0.2f}, {11, -3.0f}}, {}});
  p.tokens.push_back({13, -0.7f, {{13, -0.7f}, {2, -1.1f}}, {}});
  r.timings = {1.5, 0.5, 2.5, 40};
  return r;
}

void ExpectSame(const sampling::SampleResult& a, const sampling::SampleResult& b) {
  EXPECT_EQ(a.token, b.token);
  EXPECT_EQ(a.logprob, b.logprob);
  ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
  for (size_t i = 0; i < a.top_logprobs.size(); ++i) {
    EXPECT_EQ(a.top_logprobs[i].token, b.top_logprobs[i].token);
    EXPECT_EQ(a.top_logprobs[i].logprob, b.top_logprobs[i].logprob);
  }
}

TEST(StepResultCodecTest, RoundTripsEveryPart) {
  const worker::StepResult in = FullResult();
  tandem::v1::StepResponse proto;
  StepResultToProto(in, &proto);
  absl::StatusOr<worker::StepResult> out = StepResultFromProto(proto, kVocab);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->step_id, 9);
  ASSERT_EQ(out->results.size(), 2u);
  ExpectSame(out->results[0].sample, in.results[0].sample);
  ASSERT_EQ(out->results[0].accepted_drafts.size(), 1u);
  ExpectSame(out->results[0].accepted_drafts[0], in.results[0].accepted_drafts[0]);
  ASSERT_EQ(out->results[1].sample.beam_candidates.size(), 2u);
  EXPECT_EQ(out->results[1].sample.beam_candidates[1].key, -1.0f);
  ASSERT_EQ(out->prompt_logprobs.size(), 1u);
  EXPECT_EQ(out->prompt_logprobs[0].id, SeqId(3));
  EXPECT_EQ(out->prompt_logprobs[0].first_position, 17);
  ASSERT_EQ(out->prompt_logprobs[0].tokens.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ExpectSame(out->prompt_logprobs[0].tokens[i], in.prompt_logprobs[0].tokens[i]);
  }
  EXPECT_EQ(out->timings.num_tokens, 40);
}

TEST(StepResultCodecTest, RefusesBadPromptLogprobs) {
  tandem::v1::StepResponse proto;
  StepResultToProto(FullResult(), &proto);
  tandem::v1::StepResponse bad_token = proto;
  bad_token.mutable_prompt_logprobs(0)->mutable_tokens(1)->mutable_top_logprobs(0)->set_token(
      kVocab);
  absl::Status s = StepResultFromProto(bad_token, kVocab).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt top-logprob token 100"), std::string::npos) << s;
  tandem::v1::StepResponse bad_position = proto;
  bad_position.mutable_prompt_logprobs(0)->set_first_position(0);
  s = StepResultFromProto(bad_position, kVocab).status();
  EXPECT_NE(s.message().find("first_position 0 must be >= 1"), std::string::npos) << s;
}

TEST(SamplingCodecTest, PromptLogprobsOnlyWhenAsked) {
  sampling::SamplingParams none;
  tandem::v1::SamplingParams proto;
  SamplingParamsToProto(none, &proto);
  EXPECT_FALSE(proto.has_prompt_logprobs());
  EXPECT_EQ(SamplingParamsFromProto(proto).prompt_logprobs, -1);
  sampling::SamplingParams asked;
  asked.prompt_logprobs = 0;
  SamplingParamsToProto(asked, &proto);
  EXPECT_EQ(SamplingParamsFromProto(proto).prompt_logprobs, 0);
}

}  // namespace
}  // namespace tandem::protocol
