#include "worker/api/step_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace tandem::worker {

absl::Status ValidateDraftFields(const SequenceStep& step, int32_t vocab_size) {
  const int64_t id = step.id.value();
  const int64_t max_drafts = static_cast<int64_t>(step.tokens.size()) - 1;
  if (step.num_draft_tokens == 0 && step.draft_probs.empty()) return absl::OkStatus();
  if (step.num_draft_tokens < 0 || step.num_draft_tokens > max_drafts) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: num_draft_tokens %d is out of range: must be in [0, %d] (the step's %d "
        "tokens minus the one before the first draft)",
        id, step.num_draft_tokens, std::max<int64_t>(0, max_drafts), step.tokens.size()));
  }
  if (step.num_draft_tokens > 0 && !step.sample) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: num_draft_tokens %d without sample: verifying drafts requires sample = "
        "true",
        id, step.num_draft_tokens));
  }
  if (step.draft_probs.size() != static_cast<size_t>(step.num_draft_tokens)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sequence %d: %d draft_probs for num_draft_tokens %d: must be exactly one per draft "
        "token",
        id, step.draft_probs.size(), step.num_draft_tokens));
  }
  const size_t first = step.tokens.size() - step.draft_probs.size();
  for (size_t i = 0; i < step.draft_probs.size(); ++i) {
    absl::Status valid =
        sampling::ValidateDraftProbs(step.tokens[first + i], step.draft_probs[i], vocab_size);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d: draft_probs[%d]: %s", id, i, valid.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::worker
