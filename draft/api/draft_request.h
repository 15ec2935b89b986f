// DraftRequest / DraftProposal: what the coordinator asks of a draft for one
// sequence and what comes back, whichever draft answers (an in-process
// proposer or tandem-draft workers over tandem.v1.Draft). They live with the
// proposer contract, below both the coordinator's DraftPool
// (coordinator/scheduler/draft_pool.h) and the coordinator <-> draft codec
// (protocol/draft_codec.h), so neither the codec nor the draft worker needs
// the scheduler. The fields follow the contract of draft/api/proposer.h.
#ifndef TANDEM_DRAFT_API_DRAFT_REQUEST_H_
#define TANDEM_DRAFT_API_DRAFT_REQUEST_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/strong_id.h"
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/speculative_verifier.h"

namespace tandem::draft {

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

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_API_DRAFT_REQUEST_H_
