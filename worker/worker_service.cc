#include "worker/worker_service.h"

#include "protocol/step_result_codec.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/grpc/grpc_api_key.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"
#include "worker/tp/step_broadcaster.h"

namespace tandem::worker {
namespace {

grpc::Status NotServing() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "worker is draining (shutting down); send no more steps");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TargetWorkerService>> TargetWorkerService::Create(
    model::ModelRunner* runner, const StepExecutorConfig& config, parallel::Communicator* comm,
    tp::MpiThreadQueue* mpi_thread) {
  ASSIGN_OR_RETURN(std::unique_ptr<StepExecutor> executor, StepExecutor::Create(runner, config));
  return std::unique_ptr<TargetWorkerService>(
      new TargetWorkerService(runner, config, std::move(executor), comm, mpi_thread));
}

TargetWorkerService::TargetWorkerService(model::ModelRunner* runner,
                                         const StepExecutorConfig& config,
                                         std::unique_ptr<StepExecutor> executor,
                                         parallel::Communicator* comm, tp::MpiThreadQueue* mpi_thread)
    : runner_(runner),
      comm_(comm),
      mpi_thread_(mpi_thread),
      config_(config),
      decoder_config_{runner->model().config().vocab_size, config.num_blocks, config.block_size},
      decoder_(std::make_unique<protocol::StepDecoder>(decoder_config_)),
      executor_(std::move(executor)) {}

grpc::Status TargetWorkerService::Info(grpc::ServerContext* context,
                                       const tandem::v1::WorkerInfoRequest* request,
                                       tandem::v1::WorkerInfoResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  const model::ModelConfig& mc = runner_->model().config();
  response->set_model_name(mc.name);
  response->set_vocab_size(mc.vocab_size);
  response->set_context_length(mc.context_length);
  response->set_num_blocks(config_.num_blocks);
  response->set_block_size(config_.block_size);
  response->set_tensor_parallel_size(comm_ == nullptr ? 1 : comm_->world_size());
  for (int32_t id : config_.eos_token_ids) response->add_eos_token_ids(id);
  return grpc::Status::OK;
}

grpc::Status TargetWorkerService::Reset(grpc::ServerContext* context,
                                        const tandem::v1::ResetRequest* request,
                                        tandem::v1::ResetResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  absl::MutexLock lock(&mutex_);
  return OnMpiThread([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ResetLocked(); });
}

grpc::Status TargetWorkerService::OnMpiThread(absl::AnyInvocable<grpc::Status()> body) {
  if (mpi_thread_ == nullptr) return body();
  grpc::Status status;
  if (!mpi_thread_->Run([&status, &body] { status = body(); })) return NotServing();
  return status;
}

grpc::Status TargetWorkerService::ResetLocked() {
  // The other ranks reset too; a failed broadcast leaves the group unusable.
  if (absl::Status sent = tp::BroadcastEnvelope(comm_, tp::EnvelopeKind::kReset); !sent.ok()) {
    has_executor_.store(false);
    return ToGrpcStatus(sent);
  }
  // Drop the old executor first so its KV mapping is released before the new
  // one is made: peak memory stays at one cache.
  executor_.reset();
  decoder_->Reset();
  last_step_id_.store(-1);
  absl::StatusOr<std::unique_ptr<StepExecutor>> executor = StepExecutor::Create(runner_, config_);
  if (!executor.ok()) {
    has_executor_.store(false);  // without an executor no step can run
    num_sequences_.store(0);
    return ToGrpcStatus(executor.status());
  }
  executor_ = *std::move(executor);
  has_executor_.store(true);
  num_sequences_.store(0);
  return grpc::Status::OK;
}

grpc::Status TargetWorkerService::Step(grpc::ServerContext* context,
                                       const tandem::v1::StepRequest* request,
                                       tandem::v1::StepResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  if (!serving_.load()) return NotServing();
  absl::MutexLock lock(&mutex_);
  grpc::Status status = OnMpiThread(
      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return StepLocked(*request, response); });
  if (metrics_ != nullptr) {
    const tandem::v1::StepTimings& t = response->timings();
    metrics_->OnCallDone(status.ok(),
                         {t.total_ms(), t.forward_ms(), t.sample_ms(), t.num_tokens()});
    metrics_->SetSequences(num_sequences_.load());
  }
  return status;
}

grpc::Status TargetWorkerService::StepLocked(const tandem::v1::StepRequest& request,
                                             tandem::v1::StepResponse* response) {
  if (executor_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "worker has no executor (a Reset failed); restart the worker");
  }
  absl::StatusOr<StepPlan> plan = decoder_->Decode(request);
  if (!plan.ok()) {
    // Decode checks everything before changing state, so the worker is as it
    // was; still INVALID_ARGUMENT, as the coordinator's encoder has moved on.
    // Nothing was broadcast: the other ranks never see a rejected plan.
    return ToGrpcStatus(plan.status());
  }
  // Only a plan rank 0 decoded is sent, so every rank decodes the same one.
  if (comm_ != nullptr && comm_->world_size() > 1) {
    absl::Status sent =
        tp::BroadcastEnvelope(comm_, tp::EnvelopeKind::kStep, request.SerializeAsString());
    if (!sent.ok()) {
      has_executor_.store(false);  // the group is out of step: only a restart helps
      executor_.reset();
      return ToGrpcStatus(sent);
    }
  }
  absl::StatusOr<StepResult> result = executor_->Execute(*plan);
  num_sequences_.store(decoder_->num_sequences());
  if (!result.ok() && comm_ != nullptr && comm_->world_size() > 1 &&
      tp::BreaksTheGroup(result.status())) {
    // The other ranks wait in this step's collectives for ever: end the group
    // (the launcher or `tandem up` restarts it; the coordinator reconnects).
    comm_->Abort(absl::StrFormat("step %d failed on rank 0 only: %s", request.step_id(),
                                 result.status().ToString()));
  }
  if (!result.ok()) return ToGrpcStatus(result.status());
  last_step_id_.store(request.step_id());
  protocol::StepResultToProto(*result, response);
  return grpc::Status::OK;
}

grpc::Status TargetWorkerService::Health(grpc::ServerContext* context,
                                         const tandem::v1::HealthRequest* request,
                                         tandem::v1::HealthResponse* response) {
  if (absl::Status key = CheckCallApiKey(api_key_, *context); !key.ok()) {
    return ToGrpcStatus(key);
  }
  response->set_status(serving_.load() && has_executor_.load()
                           ? tandem::v1::WORKER_STATUS_SERVING
                           : tandem::v1::WORKER_STATUS_NOT_SERVING);
  response->set_num_sequences(num_sequences_.load());
  response->set_last_step_id(last_step_id_.load());
  return grpc::Status::OK;
}

}  // namespace tandem::worker
