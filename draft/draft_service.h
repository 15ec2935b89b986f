// DraftService: the tandem.v1.Draft gRPC service of one draft worker, over a
// ModelProposer. The one place where the proposer's absl::Status errors
// become gRPC codes (DESIGN.md "Errors"): INVALID_ARGUMENT for a malformed
// request, RESOURCE_EXHAUSTED when the draft's KV cache is full, UNAVAILABLE
// while draining.
//
// Thread-safety: the gRPC server calls the handlers from its thread pool;
// `mutex_` serializes Propose and Release (one forward at a time). Info reads
// only immutable model facts.
#ifndef TANDEM_DRAFT_DRAFT_SERVICE_H_
#define TANDEM_DRAFT_DRAFT_SERVICE_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "draft/model_proposer.h"
#include "tandem/v1/draft.grpc.pb.h"

namespace tandem::draft {

class DraftService final : public tandem::v1::Draft::Service {
 public:
  explicit DraftService(std::unique_ptr<ModelProposer> proposer);
  DraftService(const DraftService&) = delete;
  DraftService& operator=(const DraftService&) = delete;

  // Draining (SIGTERM) sets false: Propose then answers UNAVAILABLE.
  void SetServing(bool serving) { serving_.store(serving); }

  grpc::Status Info(grpc::ServerContext* context, const tandem::v1::DraftInfoRequest* request,
                    tandem::v1::DraftInfoResponse* response) override;
  // All sequences of the request in one batch (one forward per drafting
  // step); on error no sequence changes.
  grpc::Status Propose(grpc::ServerContext* context, const tandem::v1::ProposeRequest* request,
                       tandem::v1::ProposeResponse* response) override;
  // Validates every entry first, then applies them in order.
  grpc::Status Release(grpc::ServerContext* context, const tandem::v1::ReleaseRequest* request,
                       tandem::v1::ReleaseResponse* response) override;

 private:
  std::atomic<bool> serving_{true};
  absl::Mutex mutex_;
  std::unique_ptr<ModelProposer> proposer_ ABSL_GUARDED_BY(mutex_);
  // Immutable copies for Info.
  const std::string model_name_;
  const int32_t vocab_size_;
  const int32_t context_length_;
  const int32_t max_sequences_;
};

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_DRAFT_SERVICE_H_
