// DraftPool: where the scheduler gets speculative proposals (DESIGN.md "One
// scheduler, two wirings"). LocalDraftPool runs a draft::Proposer in-process
// (tandem run, a coordinator with an n-gram draft); GrpcDraftPool spreads
// sequences over tandem-draft workers. Each sequence follows the proposer
// contract of draft/proposer.h: the scheduler sends the tokens the draft has
// not seen (at start_pos = the length the draft holds), receives up to gamma
// tokens, and rolls the draft back to the accepted length with Release.
//
// A draft must never fail a request: Propose never fails as a whole; a
// sequence whose draft is lost or errs comes back with ok = false, the pool
// forgets it, and the scheduler decodes it plainly from then on.
//
// Thread-safety: one caller at a time (the scheduler thread).
#ifndef TANDEM_COORDINATOR_SCHEDULER_DRAFT_POOL_H_
#define TANDEM_COORDINATOR_SCHEDULER_DRAFT_POOL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/strong_id.h"
#include "draft/api/draft_request.h"

namespace tandem::coordinator {

// The scheduler's names for the draft contract's types (draft/api).
using DraftRequest = draft::DraftRequest;
using DraftProposal = draft::DraftProposal;

class DraftPool {
 public:
  virtual ~DraftPool() = default;
  // One proposal per request, in order (see the class comment for failures).
  virtual std::vector<DraftProposal> Propose(std::span<const DraftRequest> requests) = 0;
  // Rolls `seq` back to keep_length tokens, or forgets it at 0. False when
  // that failed: the error is logged and the draft forgot the sequence
  // (the caller stops speculating it).
  virtual bool Release(SeqId seq, int32_t keep_length) = 0;
  // What drafts ("ngram", "draft workers at ...") for logs.
  virtual std::string name() const = 0;
  // Whether sequences of requests naming draft kind `kind` (empty: the
  // deployment's draft) can be drafted here now.
  virtual bool Serves(std::string_view kind) const = 0;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_DRAFT_POOL_H_
