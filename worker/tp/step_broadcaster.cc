#include "worker/tp/step_broadcaster.h"

#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "tandem/v1/worker.pb.h"
#include "protocol/step_decoder.h"

namespace tandem::tp {

std::string EncodeEnvelope(EnvelopeKind kind, const std::string& payload) {
  std::string bytes(1, static_cast<char>(kind));
  bytes += payload;
  return bytes;
}

absl::StatusOr<Envelope> DecodeEnvelope(const std::string& bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("plan envelope is empty: needs a kind byte");
  const int kind = static_cast<uint8_t>(bytes[0]);
  if (kind < static_cast<int>(EnvelopeKind::kStep) ||
      kind > static_cast<int>(EnvelopeKind::kShutdown)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan envelope kind %d is unknown: must be in [1, 3]", kind));
  }
  return Envelope{static_cast<EnvelopeKind>(kind), bytes.substr(1)};
}

bool BreaksTheGroup(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
      return false;
    default:
      return true;
  }
}

absl::Status BroadcastEnvelope(parallel::Communicator* comm, EnvelopeKind kind, const std::string& payload) {
  if (comm == nullptr || comm->world_size() == 1) return absl::OkStatus();
  std::string bytes = EncodeEnvelope(kind, payload);
  return comm->Broadcast(&bytes, 0);
}

absl::Status RunFollower(model::ModelRunner* runner, const worker::StepExecutorConfig& config,
                         parallel::Communicator* comm) {
  worker::StepExecutorConfig exec_config = config;
  exec_config.sample = false;
  const protocol::StepDecoderConfig decoder_config{runner->model().config().vocab_size,
                                                 config.num_blocks,
                                                 config.block_size};
  auto decoder = std::make_unique<protocol::StepDecoder>(decoder_config);
  ASSIGN_OR_RETURN(std::unique_ptr<worker::StepExecutor> executor,
                   worker::StepExecutor::Create(runner, exec_config));
  std::string bytes;
  while (true) {
    RETURN_IF_ERROR(comm->Broadcast(&bytes, 0));
    ASSIGN_OR_RETURN(Envelope envelope, DecodeEnvelope(bytes));
    switch (envelope.kind) {
      case EnvelopeKind::kShutdown:
        return absl::OkStatus();
      case EnvelopeKind::kReset: {
        executor.reset();  // release the old KV mapping first, as rank 0 does
        decoder->Reset();
        ASSIGN_OR_RETURN(executor, worker::StepExecutor::Create(runner, exec_config));
        break;
      }
      case EnvelopeKind::kStep: {
        tandem::v1::StepRequest request;
        if (!request.ParseFromString(envelope.payload)) {
          return absl::DataLossError(absl::StrFormat(
              "rank %d cannot parse the broadcast StepRequest (%d bytes)", comm->rank(),
              envelope.payload.size()));
        }
        absl::StatusOr<worker::StepPlan> plan = decoder->Decode(request);
        if (!plan.ok()) {
          return absl::InternalError(absl::StrFormat(
              "rank %d cannot decode step %d that rank 0 accepted: %s", comm->rank(),
              request.step_id(), plan.status().ToString()));
        }
        absl::StatusOr<worker::StepResult> result = executor->Execute(*plan);
        if (!result.ok() && BreaksTheGroup(result.status())) {
          return absl::Status(result.status().code(),
                              absl::StrFormat("rank %d: step %d failed on this rank only: %s",
                                              comm->rank(), request.step_id(),
                                              result.status().message()));
        }
        if (!result.ok()) {
          std::fprintf(stderr, "tandem-worker rank %d: step %lld failed: %s\n", comm->rank(),
                       static_cast<long long>(request.step_id()),
                       result.status().ToString().c_str());
        }
        break;
      }
    }
  }
}

}  // namespace tandem::tp
