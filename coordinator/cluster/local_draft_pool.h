// LocalDraftPool: a DraftPool over one in-process draft::Proposer (n-gram,
// layer-skip or a draft model; draft/proposer_factory.h). A failed
// ProposeBatch fails every sequence of the call (ok = false): they decode
// plainly from then on.
//
// Thread-safety: none (the scheduler thread).
#ifndef TANDEM_COORDINATOR_CLUSTER_LOCAL_DRAFT_POOL_H_
#define TANDEM_COORDINATOR_CLUSTER_LOCAL_DRAFT_POOL_H_

#include <functional>
#include <memory>

#include "coordinator/scheduler/draft_pool.h"
#include "draft/api/proposer.h"

namespace tandem::coordinator {

class LocalDraftPool : public DraftPool {
 public:
  explicit LocalDraftPool(std::unique_ptr<draft::Proposer> proposer)
      : proposer_(std::move(proposer)) {}

  std::vector<DraftProposal> Propose(std::span<const DraftRequest> requests) override;
  bool Release(SeqId seq, int32_t keep_length) override;
  std::string name() const override { return proposer_->info().name; }
  bool Serves(std::string_view kind) const override;

  const draft::Proposer& proposer() const { return *proposer_; }

 private:
  std::unique_ptr<draft::Proposer> proposer_;
};

// What makes in-process n-gram draft pools (DraftPoolSet's pool for
// requests naming "ngram") for a target of `vocab_size` tokens.
std::function<std::unique_ptr<DraftPool>()> NgramDraftPoolMaker(
    int32_t block_size, int32_t vocab_size, std::vector<int32_t> eos_token_ids);

// Draft tokens as the verifier takes them.
sampling::DraftProbs ToDraftProbs(const draft::DraftToken& token);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_CLUSTER_LOCAL_DRAFT_POOL_H_
