// InferenceService: the public tandem.v1.Inference gRPC API over one or more
// worker groups (a WorkerGroupPool), each driven by its own Scheduler and
// SchedulerLoop, on gRPC's callback API: no thread per call. A Generate or
// GenerateStream handler parses and validates the request into a native
// GenerateRequest, lets the pool's Router pick a group, registers the call's
// reactor (GenerateUnaryReactor, GenerateStreamReactor) for the request's
// results and submits it through that group's SchedulerLoop; the scheduler
// thread reports results through this class's RequestObserver callbacks, which
// the registry delivers to the reactor on its own thread; the reactor answers
// the client. Proto types and gRPC status codes stop here and in those
// reactors (DESIGN.md "Boundaries", "Errors").
//
// Thread-safety: the RPC handlers run on gRPC's callback threads,
// concurrently, and never block on a request; OnDelta / OnFinished run on the
// scheduler threads and only queue. StopAdmitting may be called from any
// thread.
#ifndef TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
#define TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/service/admitted_request.h"
#include "coordinator/cluster/draft_worker_set.h"
#include "coordinator/scheduler/request.h"
#include "coordinator/service/request_registry.h"
#include "protocol/generate_response_codec.h"
#include "coordinator/scheduler/worker_group.h"
#include "coordinator/cluster/worker_group_pool.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tandem/v1/inference.grpc.pb.h"

namespace tandem::coordinator {

class InferenceService final : public tandem::v1::Inference::CallbackService,
                               public RequestObserver {
 public:
  // `tokenizer` and `info` describe the served model and must outlive the
  // service. Call set_pool() before serving.
  InferenceService(const tokenizer::Tokenizer* tokenizer, const WorkerGroupInfo& info);

  // The kind (draft::DraftKindOfName) of the coordinator's in-process draft
  // (--speculative), if any; with the draft workers and n-gram drafting it
  // is what a request's speculative.draft may name.
  void set_local_draft_kind(std::string kind) { local_draft_kind_ = std::move(kind); }
  // The groups requests run on, whose schedulers report to this service;
  // `drafts` (may be null) the draft workers ModelInfo lists. Both must
  // outlive the server's handlers. Call before serving.
  void set_pool(WorkerGroupPool* pool, const DraftWorkerSet* drafts) {
    pool_ = pool;
    drafts_ = drafts;
  }
  // New generation requests are refused with UNAVAILABLE from now on
  // (SIGTERM); requests already admitted run on until they finish or the
  // server's Shutdown deadline cancels their calls.
  void StopAdmitting() { admitting_.store(false); }

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const tandem::v1::GenerateRequest* request,
                                     tandem::v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<tandem::v1::GenerateStreamResponse>* GenerateStream(
      grpc::CallbackServerContext* context, const tandem::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const tandem::v1::TokenizeRequest* request,
                                     tandem::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const tandem::v1::DetokenizeRequest* request,
                                       tandem::v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* context,
                                      const tandem::v1::ModelInfoRequest* request,
                                      tandem::v1::ModelInfoResponse* response) override;

  // RequestObserver (scheduler threads): queued for the request's reactor.
  void OnDelta(const CompletionDelta& delta) override;
  void OnFinished(const RequestOutput& output) override;

 private:
  // Parses and validates `request`, routes it to a group, registers
  // `observer` for its results and submits it. UNAVAILABLE while not
  // admitting or with no healthy group; INVALID_ARGUMENT for a bad request,
  // naming the value; the scheduler's refusal otherwise. On error nothing
  // stays registered.
  absl::StatusOr<AdmittedRequest> Admit(const tandem::v1::GenerateRequest& request, RequestId id,
                                        const protocol::OutputFormat& format,
                                        RequestObserver* observer);
  // The native request of a validated `request`, with id `id`.
  absl::StatusOr<GenerateRequest> Parse(const tandem::v1::GenerateRequest& request, RequestId id);
  // The response format of `request`; an empty request_id becomes
  // "tandem-ID" after the request's id (echoed in every response and logged).
  static protocol::OutputFormat FormatOf(const tandem::v1::GenerateRequest& request, RequestId id);
  // InvalidArgument unless `requested` (a request's speculative.draft) is
  // empty or a draft kind that runs here, naming the kinds that do.
  absl::Status CheckRequestedDraft(const std::string& requested) const;
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const tandem::v1::GenerateRequest& request) const;
  // The bodies of the unary RPCs that answer at once.
  grpc::Status TokenizeNow(const tandem::v1::TokenizeRequest& request,
                           tandem::v1::TokenizeResponse* response) const;
  grpc::Status DetokenizeNow(const tandem::v1::DetokenizeRequest& request,
                             tandem::v1::DetokenizeResponse* response) const;
  void ModelInfoNow(tandem::v1::ModelInfoResponse* response) const;

  const tokenizer::Tokenizer* tokenizer_;
  WorkerGroupInfo info_;
  WorkerGroupPool* pool_ = nullptr;
  const DraftWorkerSet* drafts_ = nullptr;
  std::string local_draft_kind_;
  std::atomic<bool> admitting_{true};
  std::atomic<int64_t> next_request_id_{1};
  // The reactors of the requests in flight, by request id.
  RequestRegistry registry_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERVICE_INFERENCE_SERVICE_H_
