#include "coordinator/api/beam_search_params.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace tandem::coordinator {

absl::Status ValidateBeamSearchParams(const BeamSearchParams& p) {
  if (p.num_beams < kMinBeams || p.num_beams > kMaxBeams) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_beams %d is out of range: must be in [%d, %d] (one beam is greedy or "
                        "sampling decoding)",
                        p.num_beams, kMinBeams, kMaxBeams));
  }
  if (p.num_beam_groups < 1 || p.num_beam_groups > p.num_beams ||
      p.num_beams % p.num_beam_groups != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_beam_groups %d is invalid: must be in [1, num_beams %d] and divide it",
        p.num_beam_groups, p.num_beams));
  }
  if (!(p.diversity_penalty >= 0.0) || std::isinf(p.diversity_penalty)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "diversity_penalty %g is out of range: must be finite and >= 0", p.diversity_penalty));
  }
  if (p.diversity_penalty > 0.0 && p.num_beam_groups == 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "diversity_penalty %g needs num_beam_groups > 1 (it is 1)", p.diversity_penalty));
  }
  if (p.num_return_sequences < 1 || p.num_return_sequences > p.num_beams) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_return_sequences %d is out of range: must be in [1, num_beams %d]",
        p.num_return_sequences, p.num_beams));
  }
  if (p.do_sample && p.num_beam_groups > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_beam_groups %d cannot be combined with sampling (diverse beam search is "
        "deterministic, as in transformers)",
        p.num_beam_groups));
  }
  if (!std::isfinite(p.length_penalty)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "length_penalty %g is out of range: must be a finite number", p.length_penalty));
  }
  return absl::OkStatus();
}

}  // namespace tandem::coordinator
