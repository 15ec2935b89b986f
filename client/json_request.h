// Parsing of one JSONL request line (`tandem run --requests`): the prompt as
// text, chat messages or token ids, plus the sampling fields with the same
// names as vLLM's API. Unknown fields are rejected so typos do not pass
// silently.
#ifndef TANDEM_CLIENT_JSON_REQUEST_H_
#define TANDEM_CLIENT_JSON_REQUEST_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/api/beam_search_params.h"
#include "engine/sampling/sampling_params.h"
#include "engine/tokenizer/chat_template.h"

namespace tandem::client {

struct JsonRequest {
  std::optional<std::string> prompt;
  std::vector<tokenizer::ChatMessage> messages;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  sampling::SamplingParams params;
  int32_t priority = 0;
  // Beam search (transformers' generate parameters): set when num_beams > 1
  // or num_beam_groups > 1, from the line's num_beams, length_penalty,
  // early_stopping (true / false / "never"), num_return_sequences,
  // num_beam_groups, diversity_penalty and do_sample over `beam_defaults`.
  // min_new_tokens is min_tokens.
  std::optional<coordinator::BeamSearchParams> beam;
  // "num_speculative_tokens": 0 turns speculation off for this request, N > 0
  // fixes its depth; unset → the server's setting.
  std::optional<int32_t> num_speculative_tokens;
  // "draft": the draft kind for this request (ngram, layer-skip[:L] or
  // model); empty → the server's draft.
  std::string draft;
};

// `defaults` (and `beam_defaults`, the command line's beam flags) supply
// fields the line leaves out. Errors name the field.
absl::StatusOr<JsonRequest> ParseJsonRequest(
    const std::string& line, const sampling::SamplingParams& defaults,
    const coordinator::BeamSearchParams& beam_defaults = {});

// The one request of a command line without --requests: the prompt as
// text, token ids or one user chat message, with the flags' params.
JsonRequest RequestFromFlags(const std::optional<std::string>& prompt,
                             const std::optional<std::vector<int32_t>>& prompt_ids,
                             const std::optional<std::string>& chat,
                             const sampling::SamplingParams& params,
                             const coordinator::BeamSearchParams& beam);

// Parses early_stopping's spellings: true / false / "never" (as JSON or as a
// flag's text "true", "false", "never"). INVALID_ARGUMENT naming the value.
absl::StatusOr<coordinator::EarlyStopping> ParseEarlyStopping(const std::string& text);

// The beam parameters when they ask for beam search (num_beams > 1 or
// num_beam_groups > 1), else nullopt (plain decoding).
std::optional<coordinator::BeamSearchParams> BeamIfRequested(
    const coordinator::BeamSearchParams& beam);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_JSON_REQUEST_H_
