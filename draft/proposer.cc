#include "draft/proposer.h"

#include <utility>

#include "common/status_macros.h"

namespace tandem::draft {

std::string_view ProposerKindName(ProposerKind kind) {
  switch (kind) {
    case ProposerKind::kModel:
      return "model";
    case ProposerKind::kLayerSkip:
      return "layer-skip";
    case ProposerKind::kNgram:
      return "ngram";
  }
  return "unknown";
}

absl::StatusOr<std::vector<DraftToken>> Proposer::Propose(
    SeqId seq, std::span<const int32_t> new_tokens, int32_t start_pos, int32_t gamma,
    const sampling::SamplingParams* params, uint64_t seed, uint64_t stream) {
  ProposeInput in{seq, new_tokens, start_pos, gamma, params, seed, stream};
  ASSIGN_OR_RETURN(std::vector<std::vector<DraftToken>> out,
                   ProposeBatch(std::span<const ProposeInput>(&in, 1)));
  return std::move(out[0]);
}

}  // namespace tandem::draft
