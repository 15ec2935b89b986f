// DraftService: the tandem.v1.Draft gRPC service of one draft worker, over a
// Proposer of any kind (model, layer-skip, ngram). The one place where the
// proposer's absl::Status errors become gRPC codes (DESIGN.md "Errors"):
// INVALID_ARGUMENT for a malformed request, RESOURCE_EXHAUSTED when the
// draft is full (KV blocks, sequences), UNAVAILABLE while draining.
//
// Thread-safety: the gRPC server calls the handlers from its thread pool;
// `mutex_` serializes Propose and Release (one forward at a time). Info reads
// only an immutable copy of the proposer's facts.
#ifndef TANDEM_DRAFT_DRAFT_SERVICE_H_
#define TANDEM_DRAFT_DRAFT_SERVICE_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/api_key.h"
#include "common/metrics/process_metrics.h"
#include "draft/api/proposer.h"
#include "tandem/v1/draft.grpc.pb.h"

namespace tandem::draft {

class DraftService final : public tandem::v1::Draft::Service {
 public:
  explicit DraftService(std::unique_ptr<Proposer> proposer);
  DraftService(const DraftService&) = delete;
  DraftService& operator=(const DraftService&) = delete;

  // Draining (SIGTERM) sets false: Propose then answers UNAVAILABLE.
  void SetServing(bool serving) {
    serving_.store(serving);
    if (metrics_ != nullptr) metrics_->SetServing(serving);
  }
  // Counts every Propose in `metrics` (may be null; must outlive the
  // service). Call before serving.
  void set_metrics(ProcessMetrics* metrics) { metrics_ = metrics; }
  // Every RPC requires `key` (--api-key; open by default): UNAUTHENTICATED
  // otherwise. Call before serving.
  void set_api_key(ApiKey key) { api_key_ = std::move(key); }

  grpc::Status Info(grpc::ServerContext* context, const tandem::v1::DraftInfoRequest* request,
                    tandem::v1::DraftInfoResponse* response) override;
  // All sequences of the request in one batch (one forward per drafting
  // step); on error no sequence changes. A proposal may hold fewer than
  // num_draft_tokens tokens, none included (proposer.h).
  grpc::Status Propose(grpc::ServerContext* context, const tandem::v1::ProposeRequest* request,
                       tandem::v1::ProposeResponse* response) override;
  // Validates every entry first, then applies them in order.
  grpc::Status Release(grpc::ServerContext* context, const tandem::v1::ReleaseRequest* request,
                       tandem::v1::ReleaseResponse* response) override;

 private:
  // Propose without the metrics.
  grpc::Status ProposeUncounted(const tandem::v1::ProposeRequest& request,
                                tandem::v1::ProposeResponse* response);

  std::atomic<bool> serving_{true};
  ProcessMetrics* metrics_ = nullptr;
  ApiKey api_key_;
  absl::Mutex mutex_;
  std::unique_ptr<Proposer> proposer_ ABSL_GUARDED_BY(mutex_);
  const ProposerInfo info_;  // for Info, without the mutex
};

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_DRAFT_SERVICE_H_
