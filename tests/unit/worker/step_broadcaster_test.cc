// worker/tp/step_broadcaster: plan envelopes round trip, bad ones are
// refused, and which step failures break a tensor-parallel group.
#include "worker/tp/step_broadcaster.h"

#include "gtest/gtest.h"

namespace tandem::tp {
namespace {

TEST(StepBroadcasterTest, EnvelopesRoundTrip) {
  absl::StatusOr<Envelope> e = DecodeEnvelope(EncodeEnvelope(EnvelopeKind::kStep, "plan"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, EnvelopeKind::kStep);
  EXPECT_EQ(e->payload, "plan");
  EXPECT_EQ(DecodeEnvelope("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeEnvelope(std::string(1, '\x09')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StepBroadcasterTest, OnlyRankLocalFailuresBreakTheGroup) {
  // The executor's checks fail alike on every rank before any collective.
  for (absl::Status s : {absl::OkStatus(), absl::InvalidArgumentError("bad block id"),
                         absl::FailedPreconditionError("no KV cache"),
                         absl::OutOfRangeError("position"), absl::NotFoundError("sequence")}) {
    EXPECT_FALSE(BreaksTheGroup(s)) << s;
  }
  // A device or transport failure is this rank's alone.
  for (absl::Status s : {absl::InternalError("cudaErrorIllegalAddress"),
                         absl::ResourceExhaustedError("out of memory"),
                         absl::UnavailableError("MPI"), absl::UnknownError("?"),
                         absl::DataLossError("broadcast")}) {
    EXPECT_TRUE(BreaksTheGroup(s)) << s;
  }
}

}  // namespace
}  // namespace tandem::tp
