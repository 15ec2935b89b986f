// Beam-search options of a request (Hugging Face transformers' generate()
// arguments) and their validation: part of the coordinator's request API
// (coordinator/api/request.h), read by the public-API codec and by the
// decoding library's BeamSearch.
#ifndef TANDEM_COORDINATOR_API_BEAM_SEARCH_PARAMS_H_
#define TANDEM_COORDINATOR_API_BEAM_SEARCH_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::coordinator {

// transformers' early_stopping: true, false or "never".
enum class EarlyStopping { kFalse, kTrue, kNever };

inline constexpr int32_t kMinBeams = 2;
inline constexpr int32_t kMaxBeams = 32;

struct BeamSearchParams {
  int32_t num_beams = 1;             // [kMinBeams, kMaxBeams] once beam search is requested
  int32_t num_beam_groups = 1;       // divides num_beams
  double diversity_penalty = 0.0;    // >= 0; needs num_beam_groups > 1 to matter
  double length_penalty = 1.0;       // exponent of the length in the hypothesis score
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int32_t num_return_sequences = 1;  // [1, num_beams]
  bool do_sample = false;            // beam sampling (not with groups)
};

// INVALID_ARGUMENT naming the value and the limit.
absl::Status ValidateBeamSearchParams(const BeamSearchParams& params);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_API_BEAM_SEARCH_PARAMS_H_
