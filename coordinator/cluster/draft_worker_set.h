// DraftWorkerSet: the draft workers (tandem-draft) the coordinator knows,
// kept in line with discovery. Reconcile connects each new address (its Info
// must report the target's vocabulary: drafts propose target token ids),
// re-checks the known ones (a worker that stops answering turns unhealthy and
// healthy again when it answers) and forgets addresses no longer listed.
// Speculative decoding (DraftPool) draws its workers from here.
//
// Thread-safety: every method may be called from any thread (one mutex; RPCs
// run outside it).
#ifndef TANDEM_COORDINATOR_CLUSTER_DRAFT_WORKER_SET_H_
#define TANDEM_COORDINATOR_CLUSTER_DRAFT_WORKER_SET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/draft.grpc.pb.h"

namespace tandem::coordinator {

struct DraftWorkerStatusSnapshot {
  std::string address;
  bool healthy = false;
  std::string model_name;
};

class DraftWorkerSet {
 public:
  // Drafts must report `vocab_size` tokens (the target's). `api_key`, when
  // set, goes with every call to them (draft workers started with
  // --api-key). `tls_ca_pem`, when not empty, makes every connection TLS
  // trusting those certificates (drafts started with --tls-cert).
  explicit DraftWorkerSet(int32_t vocab_size, std::optional<std::string> api_key = std::nullopt,
                          std::string tls_ca_pem = "")
      : vocab_size_(vocab_size), api_key_(std::move(api_key)), tls_ca_pem_(std::move(tls_ca_pem)) {}

  // Adds the API key (if any) to a call's `context` to a draft worker.
  void Authorize(grpc::ClientContext& context) const;

  // Brings the set in line with `addresses`: connects new ones (up to
  // `timeout` each; failures are logged once and retried next call),
  // re-checks known ones with Info (deadline `timeout`), drops unlisted ones.
  void Reconcile(const std::vector<std::string>& addresses, absl::Duration timeout);

  // Every known draft worker, in the order they were found.
  std::vector<DraftWorkerStatusSnapshot> Statuses() const;
  // Known and healthy workers.
  int32_t num_healthy() const;
  // The healthy workers' addresses and channels (for DraftPool RPCs); with
  // `requested_kind` (draft::ValidateRequestedDraft) only workers of that
  // kind.
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> Healthy(
      std::string_view requested_kind = {}) const;
  // A call to `address` failed: unhealthy until the next Reconcile finds it
  // answering again.
  void MarkUnhealthy(const std::string& address);

 private:
  struct Worker {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<tandem::v1::Draft::Stub> stub;
    std::string model_name;
    bool healthy = false;
  };

  // Calls Info on `worker` (connecting first, up to `timeout`). Checks the
  // vocabulary; returns the model name. UNAVAILABLE when it does not answer,
  // INVALID_ARGUMENT for a vocabulary mismatch.
  absl::StatusOr<std::string> CheckWorker(Worker& worker, absl::Duration timeout) const;

  const int32_t vocab_size_;
  const std::optional<std::string> api_key_;
  const std::string tls_ca_pem_;
  mutable absl::Mutex mutex_;
  std::vector<std::shared_ptr<Worker>> workers_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_DRAFT_WORKER_SET_H_
