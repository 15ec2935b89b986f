// RequestStream: deltas of one index coalesce while untaken (text, tokens,
// logprobs appended; a replacing delta replaces; the finish reason sticks),
// indices stay apart in order, the final output is taken once.
#include "coordinator/service/request_stream.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

CompletionDelta Delta(int32_t index, std::string text, std::vector<int32_t> tokens,
                      FinishReason finish = FinishReason::kNone, bool replace = false) {
  CompletionDelta d;
  d.id = RequestId(7);
  d.index = index;
  d.text = std::move(text);
  d.token_ids = std::move(tokens);
  for (int32_t t : d.token_ids) d.logprobs.push_back({t, -1.0f * t, {}});
  d.finish_reason = finish;
  d.replace = replace;
  return d;
}

TEST(RequestStreamTest, EmptyStreamHasNothingPending) {
  RequestStream stream;
  EXPECT_FALSE(stream.HasPending());
  EXPECT_FALSE(stream.finished());
  RequestStream::Batch batch = stream.Take();
  EXPECT_TRUE(batch.deltas.empty());
  EXPECT_FALSE(batch.finished.has_value());
}

TEST(RequestStreamTest, DeltasOfOneIndexCoalesceUntilTaken) {
  RequestStream stream;
  stream.PushDelta(Delta(0, "Hel", {1, 2}));
  stream.PushDelta(Delta(0, "lo", {3}, FinishReason::kStop));
  ASSERT_TRUE(stream.HasPending());
  RequestStream::Batch batch = stream.Take();
  ASSERT_EQ(batch.deltas.size(), 1u);
  EXPECT_EQ(batch.deltas[0].text, "Hello");
  EXPECT_EQ(batch.deltas[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_EQ(batch.deltas[0].logprobs.size(), 3u);
  EXPECT_EQ(batch.deltas[0].logprobs[2].token, 3);
  EXPECT_EQ(batch.deltas[0].finish_reason, FinishReason::kStop);
  EXPECT_FALSE(stream.HasPending());

  stream.PushDelta(Delta(0, "!", {4}));
  batch = stream.Take();
  ASSERT_EQ(batch.deltas.size(), 1u);
  EXPECT_EQ(batch.deltas[0].text, "!");
}

TEST(RequestStreamTest, IndicesStayApartInIndexOrder) {
  RequestStream stream;
  stream.PushDelta(Delta(2, "c", {30}));
  stream.PushDelta(Delta(0, "a", {10}));
  stream.PushDelta(Delta(2, "d", {31}));
  RequestStream::Batch batch = stream.Take();
  ASSERT_EQ(batch.deltas.size(), 2u);
  EXPECT_EQ(batch.deltas[0].index, 0);
  EXPECT_EQ(batch.deltas[0].text, "a");
  EXPECT_EQ(batch.deltas[1].index, 2);
  EXPECT_EQ(batch.deltas[1].text, "cd");
}

TEST(RequestStreamTest, ReplacingDeltaReplacesAndLaterDeltasAppendToIt) {
  RequestStream stream;
  stream.PushDelta(Delta(0, "old", {1}));
  stream.PushDelta(Delta(0, "new best", {5, 6}, FinishReason::kNone, /*replace=*/true));
  stream.PushDelta(Delta(0, "!", {7}));
  RequestStream::Batch batch = stream.Take();
  ASSERT_EQ(batch.deltas.size(), 1u);
  EXPECT_TRUE(batch.deltas[0].replace);
  EXPECT_EQ(batch.deltas[0].text, "new best!");
  EXPECT_EQ(batch.deltas[0].token_ids, (std::vector<int32_t>{5, 6, 7}));
}

// Beam search streams replacing deltas; the prompt logprobs of the
// request's first delta must survive one that replaces it before a Take.
TEST(RequestStreamTest, PromptLogprobsOutliveAReplacingDelta) {
  RequestStream stream;
  CompletionDelta first = Delta(0, "a", {1}, FinishReason::kNone, /*replace=*/true);
  first.prompt_logprobs = {{5, -0.5f, {}}, {6, -0.25f, {}}};
  stream.PushDelta(first);
  stream.PushDelta(Delta(0, "ab", {1, 2}, FinishReason::kNone, /*replace=*/true));
  stream.PushDelta(Delta(0, "c", {3}));
  RequestStream::Batch batch = stream.Take();
  ASSERT_EQ(batch.deltas.size(), 1u);
  EXPECT_EQ(batch.deltas[0].text, "abc");
  ASSERT_EQ(batch.deltas[0].prompt_logprobs.size(), 2u);
  EXPECT_EQ(batch.deltas[0].prompt_logprobs[1].token, 6);
}

TEST(RequestStreamTest, FinishedOutputIsTakenOnceWithTheLastDeltas) {
  RequestStream stream;
  stream.PushDelta(Delta(0, "x", {1}));
  RequestOutput output;
  output.id = RequestId(7);
  output.status = absl::UnavailableError("worker group 127.0.0.1:1 lost");
  stream.PushFinished(output);
  EXPECT_TRUE(stream.finished());
  RequestStream::Batch batch = stream.Take();
  EXPECT_EQ(batch.deltas.size(), 1u);
  ASSERT_TRUE(batch.finished.has_value());
  EXPECT_EQ(batch.finished->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(stream.HasPending());
  EXPECT_TRUE(stream.finished());
  EXPECT_FALSE(stream.Take().finished.has_value());
}

}  // namespace
}  // namespace tandem::coordinator
