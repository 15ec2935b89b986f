// GrpcDraftPool: a DraftPool over the tandem-draft workers DraftWorkerSet
// knows. A new sequence goes to the healthy worker holding the fewest
// sequences (of the draft kind its request named, if any) and stays there
// (its draft KV lives there). Each Propose sends
// one tandem.v1.Draft.Propose per worker involved; a failed call marks the
// worker unhealthy and fails its sequences (ok = false: they decode plainly
// from then on), so a dying draft worker never fails a request.
//
// Thread-safety: none (the scheduler thread); DraftWorkerSet is shared with
// discovery and is thread-safe.
#ifndef TANDEM_COORDINATOR_CLUSTER_GRPC_DRAFT_POOL_H_
#define TANDEM_COORDINATOR_CLUSTER_GRPC_DRAFT_POOL_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "coordinator/scheduler/draft_pool.h"
#include "coordinator/cluster/draft_worker_set.h"

namespace tandem::coordinator {

class GrpcDraftPool : public DraftPool {
 public:
  // `workers` must outlive the pool; `timeout` bounds each RPC. Draft
  // workers are shared by every scheduler (and coordinator) using them, so
  // sequence ids go out offset by a random base in the upper 32 bits.
  GrpcDraftPool(DraftWorkerSet* workers, absl::Duration timeout);

  std::vector<DraftProposal> Propose(std::span<const DraftRequest> requests) override;
  bool Release(SeqId seq, int32_t keep_length) override;
  std::string name() const override { return "draft workers"; }
  bool Serves(std::string_view kind) const override;

 private:
  struct Assigned {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
  };

  // The worker of `seq`, choosing one of `kind` (empty: any) for a new
  // sequence (`start_pos` 0); nullptr when there is none (no healthy worker
  // of that kind, or its worker is gone).
  const Assigned* WorkerFor(SeqId seq, int32_t start_pos, std::string_view kind);
  // Drops `seq`'s assignment (and its count in load_).
  void Unassign(SeqId seq);
  // Drops every assignment to `address` (the worker is gone).
  void Forget(const std::string& address);

  int64_t WireId(SeqId seq) const { return id_base_ + seq.value(); }

  DraftWorkerSet* workers_;
  const absl::Duration timeout_;
  const int64_t id_base_;
  absl::flat_hash_map<SeqId, Assigned> assigned_;
  absl::flat_hash_map<std::string, int64_t> load_;  // sequences per address
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_GRPC_DRAFT_POOL_H_
