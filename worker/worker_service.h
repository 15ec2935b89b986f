// TargetWorkerService: the tandem.v1.TargetWorker gRPC service of one target
// worker group (rank 0 of the tensor-parallel group). It owns the group's StepDecoder
// (which turns the coordinator's diff-carrying StepRequests back into full
// StepPlans) and StepExecutor (KV storage, sequence histories, sampler), and
// is the one place where their absl::Status errors become gRPC codes
// (DESIGN.md "Errors").
//
// Thread-safety: the gRPC server calls the handlers from its thread pool.
// Steps are sequential by protocol; `mutex_` serializes Step and Reset anyway
// so a misbehaving client cannot run two forwards at once. Info and Health
// never wait for a running step: Health reads atomics the step updates.
// With a tensor-parallel group (world size > 1), Step and Reset hand their
// work to the MPI thread (MpiThreadQueue) and broadcast each accepted plan
// (worker/tp/step_broadcaster.h) before running their own shard.
#ifndef TANDEM_WORKER_WORKER_SERVICE_H_
#define TANDEM_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/api_key.h"
#include "common/metrics/process_metrics.h"
#include "engine/model/model_runner.h"
#include "engine/parallel/communicator.h"
#include "protocol/step_decoder.h"
#include "tandem/v1/worker.grpc.pb.h"
#include "worker/step_executor.h"
#include "worker/tp/mpi_thread_queue.h"

namespace tandem::worker {

class TargetWorkerService final : public tandem::v1::TargetWorker::Service {
 public:
  // Creates the executor (KV cache of `config.num_blocks` blocks) and the
  // decoder for `runner`, which must outlive the service. Fails as
  // StepExecutor::Create does (bad geometry, storage over the memory limit).
  // The service starts serving; see SetServing.
  // `comm` (rank 0 of the group) and `mpi_thread` (where collectives must
  // run) may be null for a group of one; otherwise both must outlive the
  // service, and Step/Reset broadcast to the other ranks on `mpi_thread`.
  static absl::StatusOr<std::unique_ptr<TargetWorkerService>> Create(
      model::ModelRunner* runner, const StepExecutorConfig& config,
      parallel::Communicator* comm = nullptr, tp::MpiThreadQueue* mpi_thread = nullptr);

  TargetWorkerService(const TargetWorkerService&) = delete;
  TargetWorkerService& operator=(const TargetWorkerService&) = delete;

  // Draining (SIGTERM) sets false: Step then answers UNAVAILABLE and Health
  // reports WORKER_STATUS_NOT_SERVING. Any thread.
  void SetServing(bool serving) {
    serving_.store(serving);
    if (metrics_ != nullptr) metrics_->SetServing(serving);
  }
  // Counts every Step in `metrics` (may be null; must outlive the service).
  // Call before serving.
  void set_metrics(ProcessMetrics* metrics) { metrics_ = metrics; }
  // Every RPC requires `key` (--api-key; open by default): UNAUTHENTICATED
  // otherwise. Call before serving.
  void set_api_key(ApiKey key) { api_key_ = std::move(key); }

  grpc::Status Info(grpc::ServerContext* context, const tandem::v1::WorkerInfoRequest* request,
                    tandem::v1::WorkerInfoResponse* response) override;
  // Forgets every sequence: a fresh decoder and executor (the KV pages are
  // released and re-mapped lazily, so this is cheap).
  grpc::Status Reset(grpc::ServerContext* context, const tandem::v1::ResetRequest* request,
                     tandem::v1::ResetResponse* response) override;
  // Decode → Execute → StepResultToProto. INVALID_ARGUMENT for a malformed
  // request (decoder state unchanged); UNAVAILABLE while draining; other
  // executor failures map by their absl code. After any error the
  // coordinator must call Reset (worker.proto).
  grpc::Status Step(grpc::ServerContext* context, const tandem::v1::StepRequest* request,
                    tandem::v1::StepResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const tandem::v1::HealthRequest* request,
                      tandem::v1::HealthResponse* response) override;

 private:
  TargetWorkerService(model::ModelRunner* runner, const StepExecutorConfig& config,
                      std::unique_ptr<StepExecutor> executor, parallel::Communicator* comm,
                      tp::MpiThreadQueue* mpi_thread);

  // Runs `body` on the MPI thread when there is one (UNAVAILABLE once it has
  // stopped), else here.
  grpc::Status OnMpiThread(absl::AnyInvocable<grpc::Status()> body);
  grpc::Status ResetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  grpc::Status StepLocked(const tandem::v1::StepRequest& request,
                          tandem::v1::StepResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  model::ModelRunner* const runner_;
  parallel::Communicator* const comm_;        // null: a group of one
  tp::MpiThreadQueue* const mpi_thread_;  // null: run in the handler's thread
  const StepExecutorConfig config_;
  const protocol::StepDecoderConfig decoder_config_;
  std::atomic<bool> serving_{true};
  ProcessMetrics* metrics_ = nullptr;
  ApiKey api_key_;

  mutable absl::Mutex mutex_;
  std::unique_ptr<protocol::StepDecoder> decoder_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<StepExecutor> executor_ ABSL_GUARDED_BY(mutex_);
  // Mirrors for Health, written under mutex_.
  std::atomic<bool> has_executor_{true};
  std::atomic<int32_t> num_sequences_{0};
  std::atomic<int64_t> last_step_id_{-1};
};

}  // namespace tandem::worker

#endif  // TANDEM_WORKER_WORKER_SERVICE_H_
