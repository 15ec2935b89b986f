// ValidateGenerateRequest: the one check every request passes before it is
// queued, whichever way it came (gRPC, a JSONL line, `tandem run` flags):
// every limit is named here, and every error names the value and the limit.
#ifndef TANDEM_COORDINATOR_SCHEDULER_REQUEST_VALIDATION_H_
#define TANDEM_COORDINATOR_SCHEDULER_REQUEST_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "coordinator/api/request.h"

namespace tandem::coordinator {

// What the serving model and its KV cache allow.
struct RequestLimits {
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // prompt + generated tokens
  int32_t num_blocks = 0;      // KV blocks of the worker group
  int32_t block_size = 0;      // tokens per KV block
  int32_t num_eos_ids = 0;     // end-of-generation ids of the tokenizer
};

// Draft tokens per round a request may ask for.
inline constexpr int32_t kMaxSpeculativeTokens = 64;
// Tokens a request may place on the worker group: its sequences (n, or
// num_beams) x (prompt + max_tokens). Each sequence's history travels in a
// step message when it is admitted, preempted or migrated; at 5 bytes a token
// this keeps one request's share of a message under 96 MiB, well within the
// 256 MiB the coordinator and workers accept.
inline constexpr int64_t kMaxRequestTokens = int64_t{1} << 24;

// InvalidArgument for a malformed request: an empty prompt, token ids
// outside the vocabulary, prompt + max_tokens past the context length,
// sampling parameters out of range (sampling::ValidateSamplingParams), beam
// options out of range (ValidateBeamSearchParams) or combined with n > 1 or
// stop strings, a draft kind that does not parse, num_speculative_tokens
// outside [0, kMaxSpeculativeTokens], sequences x (prompt + max_tokens) past
// kMaxRequestTokens. ResourceExhausted when the prompt
// alone needs more KV blocks than the group has.
absl::Status ValidateGenerateRequest(const GenerateRequest& request, const RequestLimits& limits);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SCHEDULER_REQUEST_VALIDATION_H_
