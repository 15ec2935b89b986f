// DraftPoolSet: the drafts one scheduler can use, so that a request may pick
// its draft kind (GenerateRequest speculative.draft, the JSONL field
// "draft"): the deployment's pool (what requests naming no kind, or its
// kind, get; may be absent) and an in-process n-gram pool for requests
// naming "ngram" that the deployment's pool does not serve, made on first
// use (prompt lookup needs no model, so every deployment offers it). A
// sequence stays with the member that took its first proposal: its draft
// state lives there.
//
// Thread-safety: none (the scheduler thread).
#ifndef TANDEM_COORDINATOR_CLUSTER_DRAFT_POOL_SET_H_
#define TANDEM_COORDINATOR_CLUSTER_DRAFT_POOL_SET_H_

#include <functional>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "coordinator/scheduler/draft_pool.h"

namespace tandem::coordinator {

class DraftPoolSet : public DraftPool {
 public:
  // `deployment` may be null: then only requests naming "ngram" speculate.
  // `make_ngram` builds the n-gram pool when first needed.
  DraftPoolSet(std::unique_ptr<DraftPool> deployment,
               std::function<std::unique_ptr<DraftPool>()> make_ngram);

  std::vector<DraftProposal> Propose(std::span<const DraftRequest> requests) override;
  bool Release(SeqId seq, int32_t keep_length) override;
  std::string name() const override;
  bool Serves(std::string_view kind) const override;

 private:
  // The member for a new sequence of `kind`; nullptr when none serves it.
  DraftPool* MemberFor(std::string_view kind);

  std::unique_ptr<DraftPool> deployment_;
  std::function<std::unique_ptr<DraftPool>()> make_ngram_;
  std::unique_ptr<DraftPool> ngram_;
  absl::flat_hash_map<SeqId, DraftPool*> member_of_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_DRAFT_POOL_SET_H_
