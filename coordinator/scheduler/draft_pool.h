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
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/speculative_verifier.h"

namespace tandem::coordinator {

struct DraftRequest {
  SeqId seq;
  std::vector<int32_t> new_tokens;  // history the draft has not seen
  int32_t start_pos = 0;            // the length the draft holds (0: new)
  int32_t gamma = 1;                // tokens wanted, >= 1
  const sampling::SamplingParams* params = nullptr;  // how the draft draws
  uint64_t seed = 0;
  uint64_t stream = 0;
  // The draft kind the request named (draft::ValidateRequestedDraft); empty
  // = the deployment's draft.
  std::string_view kind;
};

struct DraftProposal {
  bool ok = true;                          // false: fall back to plain decoding
  std::vector<int32_t> tokens;             // at most gamma, possibly none
  std::vector<sampling::DraftProbs> probs;  // one per token: q for verification
};

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
