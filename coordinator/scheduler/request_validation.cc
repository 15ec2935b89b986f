#include "coordinator/scheduler/request_validation.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "draft/api/speculative_spec.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::coordinator {
namespace {

absl::Status ValidatePrompt(const GenerateRequest& request, const RequestLimits& limits) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  if (prompt_len == 0) {
    return absl::InvalidArgumentError("prompt is empty: at least 1 token is required");
  }
  for (int32_t t : request.prompt_tokens) {
    if (t < 0 || t >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "prompt token id %d is out of range: the vocabulary has %d tokens", t,
          limits.vocab_size));
    }
  }
  if (prompt_len >= limits.context_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt has %d tokens: the context length is %d (and at least 1 token is generated)",
        prompt_len, limits.context_length));
  }
  const int64_t max_tokens = request.params.max_tokens;
  if (prompt_len + max_tokens > limits.context_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt of %d tokens + max_tokens %d = %d tokens: the context length is %d",
        prompt_len, max_tokens, prompt_len + max_tokens, limits.context_length));
  }
  return absl::OkStatus();
}

absl::Status ValidateBeamRequest(const GenerateRequest& request, const RequestLimits& limits) {
  const BeamSearchParams& beam = *request.beam;
  RETURN_IF_ERROR(ValidateBeamSearchParams(beam));
  if (request.params.n != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "n %d with num_beams %d: beam search returns num_return_sequences sequences; n must be 1",
        request.params.n, beam.num_beams));
  }
  if (beam.do_sample && request.params.temperature < sampling::kGreedyTemperature) {
    // transformers refuses do_sample at temperature 0 too; the beam warpers
    // divide by it.
    return absl::InvalidArgumentError(absl::StrFormat(
        "temperature %g with do_sample beam search: must be >= %g", request.params.temperature,
        sampling::kGreedyTemperature));
  }
  if (!request.params.stop.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d stop strings with num_beams %d: beam search stops on EOS and stop token ids only",
        request.params.stop.size(), beam.num_beams));
  }
  // The worker returns max(2, 1 + #EOS ids) x group size candidates per
  // beam (plus num_beams with groups).
  const int64_t num_eos = limits.num_eos_ids + static_cast<int64_t>(request.params.stop_token_ids.size());
  const int64_t group_size = beam.num_beams / beam.num_beam_groups;
  const int64_t per_beam = std::max<int64_t>(2, 1 + num_eos) * group_size +
                           (beam.num_beam_groups > 1 ? beam.num_beams : 0);
  if (per_beam > sampling::kMaxBeamCandidates) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_beams %d with %d EOS / stop token ids needs %d candidates per beam: the limit is %d",
        beam.num_beams, num_eos, per_beam, sampling::kMaxBeamCandidates));
  }
  return absl::OkStatus();
}

absl::Status ValidateSpeculation(const GenerateRequest& request) {
  if (request.num_speculative_tokens.has_value() &&
      (*request.num_speculative_tokens < 0 ||
       *request.num_speculative_tokens > kMaxSpeculativeTokens)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "num_speculative_tokens %d is out of range: must be in [0, %d]",
        *request.num_speculative_tokens, kMaxSpeculativeTokens));
  }
  if (!request.draft.empty()) RETURN_IF_ERROR(draft::ValidateRequestedDraft(request.draft));
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGenerateRequest(const GenerateRequest& request, const RequestLimits& limits) {
  RETURN_IF_ERROR(ValidatePrompt(request, limits));
  RETURN_IF_ERROR(sampling::ValidateSamplingParams(request.params, limits.vocab_size));
  if (request.params.beam_candidates != 0 || request.params.beam_sample) {
    return absl::InvalidArgumentError(
        "beam_candidates / beam_sample are set by the scheduler, not by requests");
  }
  if (request.beam.has_value()) RETURN_IF_ERROR(ValidateBeamRequest(request, limits));
  RETURN_IF_ERROR(ValidateSpeculation(request));
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  const int64_t num_seqs = request.beam.has_value() ? request.beam->num_beams : request.params.n;
  const int64_t total = num_seqs * (prompt_len + request.params.max_tokens);
  if (total > kMaxRequestTokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences x (prompt of %d tokens + max_tokens %d) = %d tokens: at most %d per "
        "request",
        num_seqs, prompt_len, request.params.max_tokens, total, kMaxRequestTokens));
  }
  const int64_t blocks_needed = (prompt_len + 1 + limits.block_size - 1) / limits.block_size;
  if (blocks_needed > limits.num_blocks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "prompt of %d tokens needs %d KV blocks: the cache holds %d blocks of %d tokens",
        prompt_len, blocks_needed, limits.num_blocks, limits.block_size));
  }
  return absl::OkStatus();
}

}  // namespace tandem::coordinator
