// Native request and output types of the coordinator: what the service layer
// (or `tandem run`) parses a client request into, and what flows back.
#ifndef TANDEM_COORDINATOR_API_REQUEST_H_
#define TANDEM_COORDINATOR_API_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/strong_id.h"
#include "coordinator/api/beam_search_params.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::coordinator {

struct GenerateRequest {
  RequestId id;
  std::vector<int32_t> prompt_tokens;
  sampling::SamplingParams params;  // validated before submission
  int32_t priority = 0;             // higher runs first; FCFS within a priority
  // Set → beam search (params.n must be 1; params.min_tokens is
  // min_new_tokens, params.max_tokens max_new_tokens; sampling fields apply
  // only with beam->do_sample). Validated by Scheduler::Submit.
  std::optional<BeamSearchParams> beam;
  // Speculative decoding override: unset → the server's setting; 0 → off
  // for this request; N > 0 → N draft tokens per round.
  std::optional<int32_t> num_speculative_tokens;
  // The draft kind for this request (draft::ValidateRequestedDraft: ngram,
  // layer-skip[:L] or model); empty → the deployment's draft.
  std::string draft;
};

enum class FinishReason {
  kNone = 0,    // still running
  kStop,        // EOS, a stop token id or a stop string
  kLength,      // max_tokens or the context length
  kCancelled,
  kError,
};
const char* FinishReasonName(FinishReason reason);

// One generated position: the chosen token and (when requested) alternatives.
struct PositionLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<sampling::TokenLogprob> top;
};

// One of the request's n completions.
struct Completion {
  std::vector<int32_t> token_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<PositionLogprobs> logprobs;
  // Beam search: transformers' sequence score (sum of logprobs /
  // generated_len ** length_penalty); returned sequences come best first.
  std::optional<double> score;
};

struct RequestOutput {
  RequestId id;
  std::vector<int32_t> prompt_token_ids;
  // params.prompt_logprobs >= 0 only: one per prompt token after the first
  // (prompt_token_ids[1..]), in order; else empty.
  std::vector<PositionLogprobs> prompt_logprobs;
  std::vector<Completion> completions;  // n entries, by sample index
  int64_t prefix_hit_tokens = 0;        // prompt tokens served from the prefix cache
  // Times the request moved to another worker group after its group failed.
  int32_t num_migrations = 0;
  // Not OK when the request failed (finish reason kError): UNAVAILABLE for a
  // lost worker group, with a message naming the step and the cause.
  absl::Status status;
  double queue_ms = 0;  // submission to first admission into the running batch
  // Speculative decoding: verification rounds, draft tokens verified, and
  // those accepted (acceptance rate = accepted / draft tokens).
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // Rounds whose draft at position i was accepted (vLLM's per-position
  // acceptance counter).
  std::vector<int64_t> num_accepted_per_position;
  double time_to_first_token_ms = 0;
  double latency_ms = 0;
};

// A streaming delta for one completion.
struct CompletionDelta {
  RequestId id;
  int32_t index = 0;
  std::string text;                 // newly completed UTF-8 text (stop strings removed)
  std::vector<int32_t> token_ids;   // tokens generated in this step
  // Beam search: text and token_ids are the current best beam in full and
  // replace what earlier deltas of this index said.
  bool replace = false;
  // One per token in token_ids when the request asked for logprobs
  // (params.logprobs > 0); else empty.
  std::vector<PositionLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  // The request's first delta only, when it asked for prompt logprobs: as
  // RequestOutput::prompt_logprobs.
  std::vector<PositionLogprobs> prompt_logprobs;
};

// Receives scheduler events on the scheduler thread; must not block.
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  virtual void OnDelta(const CompletionDelta& delta) = 0;
  virtual void OnFinished(const RequestOutput& output) = 0;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_API_REQUEST_H_
