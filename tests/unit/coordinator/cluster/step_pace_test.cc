// StepPace: deadlines before and after a measured step, scaling with tokens
// at the slowest recent cost per token, the window forgetting old steps,
// suspicion of an overdue step, and config validation. Time is passed in,
// so nothing sleeps.
#include "coordinator/cluster/step_pace.h"

#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

StepPaceConfig Config() {
  StepPaceConfig c;
  c.initial_deadline = absl::Seconds(60);
  c.deadline_floor = absl::Seconds(10);
  c.deadline_slack = 4;
  c.suspect_floor = absl::Seconds(1);
  c.suspect_slack = 2;
  return c;
}

// One answered step of `tokens` that took `ms`, starting at `start`.
void Answer(StepPace& pace, int64_t tokens, double ms, absl::Time start = kT0) {
  pace.Begin(tokens, start);
  pace.End(start + absl::Milliseconds(ms), /*answered=*/true);
}

TEST(StepPaceTest, UnmeasuredGroupGetsTheInitialDeadline) {
  StepPace pace(Config());
  EXPECT_FALSE(pace.Expected(100).has_value());
  EXPECT_EQ(pace.Deadline(8000), absl::Seconds(60));
  // A step that failed teaches nothing.
  pace.Begin(10, kT0);
  pace.End(kT0 + absl::Seconds(5), /*answered=*/false);
  EXPECT_EQ(pace.Deadline(1), absl::Seconds(60));
}

TEST(StepPaceTest, DeadlineScalesWithTokensAtTheSlowestRecentRate) {
  StepPace pace(Config());
  Answer(pace, 32, 64);     // 2 ms a token (a decode batch)
  Answer(pace, 1024, 512);  // 0.5 ms a token (a prefill chunk)
  EXPECT_EQ(*pace.Expected(1024), absl::Milliseconds(2048));
  EXPECT_EQ(pace.Deadline(1024), absl::Seconds(10) + 4 * absl::Milliseconds(2048));
  // A long prefill measured at 27 s a chunk: the next chunk's deadline
  // (10 + 4 x 27 s) leaves it room to grow with the context.
  Answer(pace, 1024, 27000);
  EXPECT_GT(pace.Deadline(1024), absl::Seconds(100));
}

TEST(StepPaceTest, TheWindowForgetsOldSteps) {
  StepPace pace(Config());
  Answer(pace, 1, 1000);  // 1000 ms a token
  for (int i = 0; i < StepPace::kWindow - 1; ++i) Answer(pace, 10, 10);
  EXPECT_EQ(*pace.Expected(1), absl::Seconds(1));
  Answer(pace, 10, 10);  // the slow step leaves the window
  // The slowest step left (10 ms) bounds a one-token step from below.
  EXPECT_EQ(*pace.Expected(1), absl::Milliseconds(10));
  EXPECT_EQ(*pace.Expected(100), absl::Milliseconds(100));
}

TEST(StepPaceTest, AStepIsExpectedToTakeAtLeastTheSlowestRecentOne) {
  StepPace pace(Config());
  Answer(pace, 1000, 500);  // a prefill chunk: 0.5 ms a token
  Answer(pace, 14, 4000);   // a step with a large fixed cost (a graph capture)
  // 14 tokens at the highest rate (~286 ms a token) would be 4 s; 2 tokens
  // at it 571 ms, but the slowest step says 4 s.
  EXPECT_EQ(*pace.Expected(2), absl::Milliseconds(4000));
}

TEST(StepPaceTest, AnOverdueStepIsSuspectUntilItEnds) {
  StepPace pace(Config());
  Answer(pace, 32, 64);  // 2 ms a token: 64 ms expected for 32 tokens
  EXPECT_FALSE(pace.Suspect(kT0 + absl::Hours(1)));  // nothing in flight
  pace.Begin(32, kT0);
  // Threshold: 1 s + 2 x 64 ms.
  EXPECT_FALSE(pace.Suspect(kT0 + absl::Milliseconds(1100)));
  EXPECT_TRUE(pace.Suspect(kT0 + absl::Milliseconds(1200)));
  pace.End(kT0 + absl::Milliseconds(1300), /*answered=*/true);
  EXPECT_FALSE(pace.Suspect(kT0 + absl::Seconds(5)));
}

TEST(StepPaceTest, AnUnmeasuredStepIsSuspectOnlyPastTheInitialDeadline) {
  StepPace pace(Config());
  pace.Begin(8000, kT0);
  EXPECT_FALSE(pace.Suspect(kT0 + absl::Seconds(59)));
  EXPECT_TRUE(pace.Suspect(kT0 + absl::Seconds(61)));
}

TEST(StepPaceTest, ConfigIsValidated) {
  EXPECT_TRUE(ValidateStepPaceConfig(Config()).ok());
  StepPaceConfig c = Config();
  c.deadline_floor = absl::ZeroDuration();
  absl::Status s = ValidateStepPaceConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("step deadline floor 0 is out of range"), std::string::npos) << s;
  c = Config();
  c.suspect_slack = 0.5;
  s = ValidateStepPaceConfig(c);
  EXPECT_NE(s.message().find("suspect slack 0.5"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::coordinator
