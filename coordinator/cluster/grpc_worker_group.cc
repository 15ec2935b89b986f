#include "coordinator/cluster/grpc_worker_group.h"

#include <chrono>
#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/grpc/grpc_api_key.h"
#include "common/grpc/internal_channel.h"
#include "common/status_macros.h"
#include "protocol/step_result_codec.h"

namespace tandem::coordinator {
namespace {

// Matches the worker's limit (worker/main.cc): steps with many long prompts
// exceed gRPC's 4 MiB default.
constexpr int kMaxMessageBytes = 256 << 20;

std::string GrpcCodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcWorkerGroup>> GrpcWorkerGroup::Connect(
    const std::string& address, absl::Duration timeout, const GrpcWorkerGroupOptions& options) {
  grpc::ChannelArguments args = InternalChannelArguments();
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, InternalChannelCredentials(options.tls_ca_pem), args);
  std::unique_ptr<GrpcWorkerGroup> group(new GrpcWorkerGroup(address, options, std::move(channel)));
  RETURN_IF_ERROR(group->FetchInfo(timeout, &group->info_, &group->eos_token_ids_));
  RETURN_IF_ERROR(group->CallReset());
  return group;
}

GrpcWorkerGroup::GrpcWorkerGroup(std::string address, const GrpcWorkerGroupOptions& options,
                                 std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(tandem::v1::TargetWorker::NewStub(channel_)),
      pace_(options.pace) {}

absl::Status GrpcWorkerGroup::RpcError(const char* rpc, const grpc::Status& status) const {
  return absl::UnavailableError(absl::StrFormat("worker group at %s: %s failed: %s: %s", address_,
                                                rpc, GrpcCodeName(status.error_code()),
                                                status.error_message()));
}

absl::Status GrpcWorkerGroup::FetchInfo(absl::Duration timeout, WorkerGroupInfo* info,
                                        std::vector<int32_t>* eos) {
  if (!channel_->WaitForConnected(GrpcDeadlineAfter(timeout))) {
    return absl::UnavailableError(absl::StrFormat(
        "worker group at %s: not reachable within %s", address_, absl::FormatDuration(timeout)));
  }
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadlineAfter(options_.control_timeout));
  AttachApiKey(context, options_.api_key);
  tandem::v1::WorkerInfoRequest request;
  tandem::v1::WorkerInfoResponse response;
  grpc::Status status = stub_->Info(&context, request, &response);
  if (!status.ok()) return RpcError("Info", status);
  if (response.vocab_size() < 1 || response.context_length() < 1 || response.num_blocks() < 1 ||
      response.block_size() < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker group at %s: Info reports vocab_size %d, context_length %d, num_blocks %d, "
        "block_size %d; each must be >= 1",
        address_, response.vocab_size(), response.context_length(), response.num_blocks(),
        response.block_size()));
  }
  info->model_name = response.model_name();
  info->vocab_size = response.vocab_size();
  info->context_length = response.context_length();
  info->num_blocks = response.num_blocks();
  info->block_size = response.block_size();
  eos->assign(response.eos_token_ids().begin(), response.eos_token_ids().end());
  return absl::OkStatus();
}

absl::Status GrpcWorkerGroup::CallReset() {
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadlineAfter(options_.control_timeout));
  AttachApiKey(context, options_.api_key);
  tandem::v1::ResetRequest request;
  tandem::v1::ResetResponse response;
  grpc::Status status = stub_->Reset(&context, request, &response);
  if (!status.ok()) return RpcError("Reset", status);
  encoder_.Reset();
  return absl::OkStatus();
}

absl::StatusOr<worker::StepResult> GrpcWorkerGroup::Step(const worker::StepPlan& plan) {
  if (broken_) {
    return absl::UnavailableError(absl::StrFormat(
        "worker group at %s is broken since an earlier step failed (%s); Reconnect it",
        address_, broken_reason_));
  }
  // A rejected plan changes neither the encoder nor the worker.
  ASSIGN_OR_RETURN(tandem::v1::StepRequest request, encoder_.Encode(plan));
  int64_t tokens = 0;
  for (const worker::SequenceStep& s : plan.sequences) tokens += std::ssize(s.tokens);
  const absl::Duration deadline = pace_.Deadline(tokens);
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadlineAfter(deadline));
  AttachApiKey(context, options_.api_key);
  tandem::v1::StepResponse response;
  pace_.Begin(tokens, absl::Now());
  grpc::Status status = stub_->Step(&context, request, &response);
  pace_.End(absl::Now(), status.ok());
  absl::Status error;
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    error = absl::UnavailableError(absl::StrFormat(
        "worker group at %s: Step of %d tokens got no answer within its deadline of %s (the "
        "group's pace x the tokens, with a floor): the worker is hung or overloaded",
        address_, tokens, absl::FormatDuration(deadline)));
  } else if (!status.ok()) {
    error = RpcError("Step", status);
  } else {
    absl::StatusOr<worker::StepResult> result =
        protocol::StepResultFromProto(response, info_.vocab_size);
    if (result.ok() && result->step_id != plan.step_id) {
      result = absl::InternalError(absl::StrFormat("response carries step_id %d, expected %d",
                                                   result->step_id, plan.step_id));
    }
    if (result.ok()) return result;
    error = absl::InternalError(absl::StrFormat("worker group at %s: malformed Step response: %s",
                                                address_, result.status().message()));
  }
  encoder_.Reset();
  broken_ = true;
  broken_reason_ = std::string(error.message());
  return error;
}

absl::Status GrpcWorkerGroup::Reconnect(absl::Duration timeout) {
  WorkerGroupInfo info;
  std::vector<int32_t> eos;
  RETURN_IF_ERROR(FetchInfo(timeout, &info, &eos));
  if (info.model_name != info_.model_name || info.vocab_size != info_.vocab_size ||
      info.context_length != info_.context_length || info.num_blocks != info_.num_blocks ||
      info.block_size != info_.block_size) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "worker group at %s now serves model '%s' (vocab %d, context %d, %d blocks of %d); "
        "connected to '%s' (vocab %d, context %d, %d blocks of %d)",
        address_, info.model_name, info.vocab_size, info.context_length, info.num_blocks,
        info.block_size, info_.model_name, info_.vocab_size, info_.context_length,
        info_.num_blocks, info_.block_size));
  }
  RETURN_IF_ERROR(CallReset());
  eos_token_ids_ = std::move(eos);
  broken_ = false;
  broken_reason_.clear();
  return absl::OkStatus();
}

}  // namespace tandem::coordinator
