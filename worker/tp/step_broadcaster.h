// The plan broadcast of a tensor-parallel target worker group (DESIGN.md "One
// request, end to end", step 3): rank 0 sends every Step / Reset it accepts,
// as a small envelope, to the other ranks, which replay it on their shard.
//
// Envelope: one kind byte, then for kStep the serialized StepRequest that rank
// 0 has already decoded successfully (so every rank decodes the identical,
// validated plan). kShutdown ends the followers' loop.
//
// Thread-safety: every function here issues collectives, so it must run on
// the rank's one MPI thread (MPI_THREAD_FUNNELED), in the same order on all
// ranks.
#ifndef TANDEM_WORKER_TP_STEP_BROADCASTER_H_
#define TANDEM_WORKER_TP_STEP_BROADCASTER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "worker/step_executor.h"
#include "engine/parallel/communicator.h"

namespace tandem::tp {

enum class EnvelopeKind : uint8_t { kStep = 1, kReset = 2, kShutdown = 3 };

struct Envelope {
  EnvelopeKind kind = EnvelopeKind::kShutdown;
  std::string payload;  // kStep: a serialized tandem.v1.StepRequest
};

std::string EncodeEnvelope(EnvelopeKind kind, const std::string& payload = "");
// InvalidArgument for an empty buffer or an unknown kind byte (naming it).
absl::StatusOr<Envelope> DecodeEnvelope(const std::string& bytes);

// Rank 0: broadcasts one envelope to every rank (no-op at world size 1).
absl::Status BroadcastEnvelope(parallel::Communicator* comm, EnvelopeKind kind,
                               const std::string& payload = "");

// True when a failed step leaves the group out of step: an error local to
// one rank (a device or communication failure: INTERNAL, UNKNOWN, DATA_LOSS,
// RESOURCE_EXHAUSTED, UNAVAILABLE, ...) that the other ranks, waiting in the
// step's collectives, never see. The executor's validation errors
// (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, NOT_FOUND) fail the
// same way on every rank before any collective and leave the group usable.
bool BreaksTheGroup(const absl::Status& status);

// Ranks != 0: receives envelopes until kShutdown (returns OK) and replays
// them on a StepDecoder + StepExecutor of their own over `runner` (this
// rank's shard on its device; `config.sample` is forced false: the forward
// runs with logits == nullptr). A step that fails the same
// way on every rank (the executor's checks) is logged and the loop goes on;
// a step that rank 0 accepted but this rank cannot decode, a collective's
// error, or a step failure that BreaksTheGroup ends the loop with that error
// (the caller aborts the group).
absl::Status RunFollower(model::ModelRunner* runner, const worker::StepExecutorConfig& config,
                         parallel::Communicator* comm);

}  // namespace tandem::tp

#endif  // TANDEM_WORKER_TP_STEP_BROADCASTER_H_
