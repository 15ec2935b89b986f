// tandem C++ SDK: the values of a generation — what a request asks for and
// what the coordinator answers — as plain structs. They mirror the public
// protocol (proto/tandem/v1/inference.proto, package tandem.v1) field for
// field; unset optionals take the server's defaults, which that file documents
// together with every limit. This header is the SDK's stable surface: it does
// not expose gRPC or protobuf types.
#ifndef TANDEM_GENERATION_H_
#define TANDEM_GENERATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tandem {

// One turn of a chat conversation ("system", "user" or "assistant").
struct ChatMessage {
  std::string role;
  std::string content;
};

// A conversation rendered through the model's chat template.
struct ChatPrompt {
  std::vector<ChatMessage> messages;  // oldest first; at least one
  bool add_generation_prompt = true;  // append the assistant prefix
};

// What to continue: text, pre-tokenized ids or a chat conversation.
using Prompt = std::variant<std::string, std::vector<int32_t>, ChatPrompt>;

// Sampling knobs and stop conditions; every unset field is the server's
// default (greedy needs temperature 0).
struct SamplingOptions {
  std::optional<float> temperature;         // >= 0; < 1e-5 is greedy
  std::optional<int32_t> top_k;             // 0 or -1: off
  std::optional<float> top_p;               // (0, 1]
  std::optional<float> min_p;               // [0, 1]
  std::optional<float> repetition_penalty;  // > 0
  std::optional<float> presence_penalty;    // [-2, 2]
  std::optional<float> frequency_penalty;   // [-2, 2]
  std::optional<uint64_t> seed;             // same seed and options → same tokens
  std::optional<int32_t> max_tokens;        // per completion, >= 1
  std::optional<int32_t> min_tokens;        // EOS masked until reached
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;            // stop strings, left out of the text
  std::optional<bool> ignore_eos;
  std::optional<int32_t> logprobs;          // alternatives per position, [0, 20]
  std::optional<int32_t> n;                 // completions, [1, 128]
  std::optional<int32_t> prompt_logprobs;   // alternatives per prompt position
};

// transformers' early_stopping.
enum class EarlyStopping { kUnspecified, kTrue, kFalse, kNever };

// Beam search with Hugging Face transformers' semantics.
struct BeamSearchOptions {
  int32_t num_beams = 2;                   // [2, 32]
  std::optional<double> length_penalty;    // unset: 1.0
  EarlyStopping early_stopping = EarlyStopping::kUnspecified;
  int32_t num_return_sequences = 0;        // 0 → 1
  int32_t num_beam_groups = 0;             // 0 → 1
  double diversity_penalty = 0;
  bool do_sample = false;
};

// Per-request tuning of the server's speculative decoding.
struct SpeculativeOptions {
  int32_t num_speculative_tokens = 0;  // 0 → the server's setting
  std::string draft;                   // "ngram", "layer-skip[:L]", "model"; empty → default
  bool off = false;                    // true → this request does not speculate
};

// One generation request. Beam search and speculation are exclusive; with
// neither the request samples (and speculates whenever the server does).
struct GenerateRequest {
  Prompt prompt;
  SamplingOptions sampling;
  std::optional<BeamSearchOptions> beam_search;
  std::optional<SpeculativeOptions> speculative;
  int32_t priority = 0;    // higher runs first
  std::string request_id;  // empty → the server assigns one
};

// Why a completion stopped; kNone while it runs.
enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };

// "stop", "length", "cancelled", "error" or "" (kNone).
const char* FinishReasonName(FinishReason reason);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// The chosen token at one position and, when asked for, its alternatives.
struct PositionLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // descending
};

// One completion of a request.
struct Completion {
  int32_t index = 0;  // in [0, n); for beam search, the rank
  std::string text;
  std::vector<int32_t> token_ids;
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<PositionLogprobs> logprobs;  // per token when logprobs > 0
  std::optional<double> score;             // beam search only
};

// Token accounting of one request.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // served from the prefix cache
};

// Server-side timings of one request, in milliseconds.
struct RequestTimings {
  double queue_ms = 0;
  double time_to_first_token_ms = 0;
  double latency_ms = 0;
};

// What a finished request produced.
struct GenerateResult {
  std::string request_id;
  std::vector<Completion> completions;  // by index (beam search: best first)
  Usage usage;
  RequestTimings timings;
  std::vector<PositionLogprobs> prompt_logprobs;  // when asked for
  std::string error;  // set when some completion finished with kError
};

// What one completion produced since the previous event.
struct CompletionDelta {
  int32_t index = 0;
  std::string text;                // new text (may be empty mid-character)
  std::vector<int32_t> token_ids;  // new tokens
  std::vector<PositionLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::kNone;  // set on its last delta
  bool replace = false;  // beam search: text/token_ids are the best beam in full
};

// One message of a stream. The last one carries usage, timings and, for
// beam search, the returned sequences.
struct StreamEvent {
  std::string request_id;
  std::vector<CompletionDelta> deltas;
  std::vector<PositionLogprobs> prompt_logprobs;  // first event with a delta
  std::optional<Usage> usage;
  std::optional<RequestTimings> timings;
  std::vector<Completion> sequences;  // beam search, last event: best first
  std::string error;
};

// Folds stream events into the finished result, as the unary call returns
// it. Used by Client::Stream; public for callers that iterate themselves.
class ResultAssembler {
 public:
  void Add(const StreamEvent& event);
  const GenerateResult& result() const { return result_; }
  GenerateResult Take() { return std::move(result_); }

 private:
  GenerateResult result_;
};

// One target worker group as the coordinator sees it (totals since added).
struct WorkerGroupStatus {
  std::string address;
  bool healthy = false;
  bool draining = false;
  int64_t load = 0;
  int64_t num_steps = 0;
  double step_ms = 0;
  double worker_step_ms = 0;
  int64_t num_generated_tokens = 0;
  int64_t num_prompt_tokens_computed = 0;
  int64_t num_preemptions = 0;
  int64_t num_blocks_used = 0;
  int64_t num_blocks_total = 0;
  int64_t num_speculative_rounds = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // Requests moved to a healthy group after this one failed, and those that
  // failed instead (no healthy group in time, or too many moves).
  int64_t num_migrations = 0;
  int64_t num_migration_failures = 0;
};

struct DraftWorkerStatus {
  std::string address;
  bool healthy = false;
  std::string model_name;
};

// The served model and the cluster behind it.
struct ModelInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int32_t context_length = 0;
  std::vector<int32_t> eos_token_ids;
  bool has_chat_template = false;
  bool beam_search = false;  // the server accepts beam search requests
  bool speculative = false;  // ... and speculative ones
  std::vector<WorkerGroupStatus> worker_groups;
  std::vector<DraftWorkerStatus> draft_workers;
};

}  // namespace tandem

#endif  // TANDEM_GENERATION_H_
