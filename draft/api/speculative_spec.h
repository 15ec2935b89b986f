// SpeculativeSpec: the value of --speculative (tandem run, tandem up, the
// coordinator and tandem-draft), naming the draft kind of a deployment:
//   model            a draft model (its path given elsewhere: --model of
//                    tandem-draft, or the target's own GGUF)
//   model:PATH       a draft model at PATH
//   layer-skip:L     the target's first L layers (L >= 1; the upper bound,
//                    the target's layer count, is checked at model load)
//   ngram            n-gram prompt lookup, no model
// Thread-safety: plain values and pure functions.
#ifndef TANDEM_DRAFT_API_SPECULATIVE_SPEC_H_
#define TANDEM_DRAFT_API_SPECULATIVE_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "draft/api/proposer.h"

namespace tandem::draft {

struct SpeculativeSpec {
  ProposerKind kind = ProposerKind::kModel;
  int32_t num_layers = 0;  // kLayerSkip: L >= 1; 0 otherwise
  std::string model_path;  // kModel with "model:PATH"; empty otherwise
};

// InvalidArgument naming the text and the accepted forms (or, for
// layer-skip, the bad L and its lower bound 1).
absl::StatusOr<SpeculativeSpec> ParseSpeculativeSpec(std::string_view text);

// The text ParseSpeculativeSpec reads back to `spec`.
std::string FormatSpeculativeSpec(const SpeculativeSpec& spec);

// Draft kinds as a request names them (GenerateRequest speculative.draft,
// the JSONL field "draft"): "ngram", "layer-skip" (any L), "layer-skip:L"
// or "model" (any draft model). Empty means the deployment's draft.
// InvalidArgument naming the text and these forms.
absl::Status ValidateRequestedDraft(std::string_view requested);

// The kind of a draft from its Draft.Info model_name (Proposer::Info::name):
// "ngram", "layer-skip:L" or "model".
std::string DraftKindOfName(std::string_view model_name);

// Whether a draft of `kind` (DraftKindOfName) serves a request naming
// `requested` (valid, non-empty).
bool DraftKindMatches(std::string_view requested, std::string_view kind);

}  // namespace tandem::draft

#endif  // TANDEM_DRAFT_API_SPECULATIVE_SPEC_H_
