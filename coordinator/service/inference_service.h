// InferenceService: the public tandem.v1.Inference gRPC API over one or more
// worker groups (a WorkerGroupPool), each driven by its own Scheduler and
// SchedulerLoop. Handler threads parse and validate each request into a
// native GenerateRequest, let the pool's Router pick a group, submit it
// through that group's SchedulerLoop and drain the request's RequestStream, which the scheduler thread fills through this
// class's RequestObserver callbacks. Proto types and gRPC status codes stop
// here (DESIGN.md "Boundaries", "Errors").
//
// Thread-safety: the RPC methods run on gRPC's handler threads, concurrently;
// OnDelta / OnFinished run on the scheduler thread and never block beyond the
// registry mutex. StopAdmitting may be called from any thread.
#ifndef TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
#define TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/scheduler/request.h"
#include "coordinator/service/request_stream.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/scheduler/worker_group.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem::coordinator {

class InferenceService final : public tandem::v1::Inference::Service, public RequestObserver {
 public:
  // `tokenizer` and `info` describe the served model and must outlive the
  // service. Call set_pool() before serving.
  InferenceService(const tokenizer::Tokenizer* tokenizer, const WorkerGroupInfo& info);

  // The groups requests run on, whose schedulers report to this service;
  // `drafts` (may be null) the draft workers ModelInfo lists. Both must
  // outlive the server's handlers. Call before serving.
  // The kind (draft::DraftKindOfName) of the coordinator's in-process draft
  // (--speculative), if any; with the draft workers and n-gram drafting it
  // is what a request's speculative.draft may name.
  void set_local_draft_kind(std::string kind) { local_draft_kind_ = std::move(kind); }
  void set_pool(WorkerGroupPool* pool, const DraftWorkerSet* drafts) {
    pool_ = pool;
    drafts_ = drafts;
  }
  // New generation requests are refused with UNAVAILABLE from now on
  // (SIGTERM); requests already admitted run to completion.
  void StopAdmitting() { admitting_.store(false); }

  grpc::Status Generate(grpc::ServerContext* context, const tandem::v1::GenerateRequest* request,
                        tandem::v1::GenerateResponse* response) override;
  grpc::Status GenerateStream(grpc::ServerContext* context,
                              const tandem::v1::GenerateRequest* request,
                              grpc::ServerWriter<tandem::v1::GenerateStreamResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const tandem::v1::TokenizeRequest* request,
                        tandem::v1::TokenizeResponse* response) override;
  grpc::Status Detokenize(grpc::ServerContext* context,
                          const tandem::v1::DetokenizeRequest* request,
                          tandem::v1::DetokenizeResponse* response) override;
  grpc::Status ModelInfo(grpc::ServerContext* context, const tandem::v1::ModelInfoRequest* request,
                         tandem::v1::ModelInfoResponse* response) override;

  // RequestObserver (scheduler thread).
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

 private:
  // Called once per stream message: deltas (empty on the last message when
  // nothing is left) and, on the last one, the output. Returns false when the
  // client is gone.
  using Emit = std::function<bool(std::vector<CompletionDelta>& deltas, const RequestOutput* done)>;

  // Parses, submits, drains the stream into `emit` until the request is over;
  // honors the deadline and cancellation.
  // InvalidArgument unless `requested` (a request's speculative.draft) is
  // empty or a draft kind that runs here, naming the kinds that do.
  absl::Status CheckRequestedDraft(const std::string& requested) const;
  grpc::Status Run(grpc::ServerContext* context, const tandem::v1::GenerateRequest& request,
                   const Emit& emit);
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const tandem::v1::GenerateRequest& request) const;

  const tokenizer::Tokenizer* tokenizer_;
  WorkerGroupInfo info_;
  WorkerGroupPool* pool_ = nullptr;
  const DraftWorkerSet* drafts_ = nullptr;
  std::string local_draft_kind_;
  std::atomic<bool> admitting_{true};
  std::atomic<int64_t> next_request_id_{1};

  absl::Mutex registry_mutex_;
  // Streams of the requests in flight; a handler registers before Submit and
  // unregisters before returning, so callbacks never outlive their stream.
  absl::flat_hash_map<RequestId, RequestStream*> streams_ ABSL_GUARDED_BY(registry_mutex_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
