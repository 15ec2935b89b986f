#include "draft/api/proposer.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/sampling/sampling_params.h"

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

absl::Status ValidateProposeInputs(std::span<const ProposeInput> inputs,
                                   const Proposer& proposer) {
  const int32_t vocab = proposer.info().vocab_size;
  const int32_t context = proposer.info().context_length;
  absl::flat_hash_set<SeqId> seen;
  for (const ProposeInput& in : inputs) {
    const int64_t id = in.seq.value();
    if (!seen.insert(in.seq).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d is listed twice: at most one entry per sequence", id));
    }
    const int32_t length = proposer.Length(in.seq);
    if (in.start_pos != length) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: start_pos %d does not match the %d tokens the draft holds", id,
          in.start_pos, length));
    }
    if (in.new_tokens.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d: new_tokens is empty: must hold >= 1 token", id));
    }
    if (in.gamma < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: num_draft_tokens %d is out of range: must be >= 1", id, in.gamma));
    }
    for (int32_t t : in.new_tokens) {
      if (t < 0 || t >= vocab) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sequence %d: token %d is out of range: must be in [0, %d)", id, t, vocab));
      }
    }
    const int64_t end = static_cast<int64_t>(in.start_pos) + in.new_tokens.size();
    if (end > context) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: %d tokens exceed the draft's context length %d", id, end, context));
    }
    if (in.params != nullptr) {
      absl::Status valid = sampling::ValidateSamplingParams(*in.params, vocab);
      if (!valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("sequence %d: %s", id, valid.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::draft
