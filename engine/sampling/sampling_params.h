// SamplingParams: the per-request decoding knobs, with the meaning vLLM and
// llama.cpp users expect, and ValidateSamplingParams, the single place where a
// request's knobs are checked against their allowed ranges.
#ifndef TANDEM_ENGINE_SAMPLING_SAMPLING_PARAMS_H_
#define TANDEM_ENGINE_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem::sampling {

// Temperatures below this are treated as 0 (greedy), as vLLM does: dividing
// logits by a vanishing temperature only overflows, and the result is argmax.
inline constexpr float kGreedyTemperature = 1e-5f;
inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr int32_t kMaxN = 128;
inline constexpr int32_t kMaxBeamCandidates = 256;
// Stop conditions a request may carry: they are checked against every
// generated token, and each stop string is held per sequence, so they are
// bounded like every other per-request size.
inline constexpr int32_t kMaxStopStrings = 64;
inline constexpr int32_t kMaxStopStringBytes = 4096;
inline constexpr int32_t kMaxStopTokenIds = 1024;

// Plain value type; no invariants are enforced until ValidateSamplingParams.
// Thread-safety: none needed (a value).
struct SamplingParams {
  float temperature = 1.0f;         // >= 0; < kGreedyTemperature → greedy (argmax, ties → lowest id)
  int32_t top_k = 0;                // 0 or -1 → off; >= 1 keeps the k highest logits (ties kept)
  float top_p = 1.0f;               // (0, 1]; 1 → off
  float min_p = 0.0f;               // [0, 1]; 0 → off
  float repetition_penalty = 1.0f;  // > 0; over prompt + generated tokens (logit > 0 → /p, else *p)
  float presence_penalty = 0.0f;    // [-2, 2]; over generated tokens
  float frequency_penalty = 0.0f;   // [-2, 2]; over generated tokens, times their count
  std::optional<uint64_t> seed;     // unset → the engine draws one per request
  int32_t max_tokens = 256;         // >= 1
  int32_t min_tokens = 0;           // [0, max_tokens]; EOS and stop_token_ids masked until reached
  std::vector<int32_t> stop_token_ids;  // at most kMaxStopTokenIds, each in [0, vocab_size)
  std::vector<std::string> stop;    // at most kMaxStopStrings of [1, kMaxStopStringBytes] bytes,
                                    // valid UTF-8; not included in output
  bool ignore_eos = false;          // EOS neither stops nor is masked
  int32_t logprobs = 0;             // top alternatives returned per position, [0, kMaxLogprobs]
  // The logprob of every prompt token after the first (the model's
  // distribution at the position before it, raw as `logprobs`) with this
  // many top alternatives each, [0, kMaxLogprobs]; -1 → none. A request that
  // asks for them is not served from the prefix cache: every position is
  // computed.
  int32_t prompt_logprobs = -1;
  int32_t n = 1;                    // samples per request, [1, kMaxN]
  // Set by the coordinator for beam search, never by clients: > 0 → the row
  // returns this many beam candidates (beam_candidates.h) instead of a token.
  int32_t beam_candidates = 0;      // [0, kMaxBeamCandidates]
  bool beam_sample = false;         // beam sampling: warpers and Gumbel keys
};

// Returns OK when every field of `p` is in range for a model with
// `vocab_size` tokens, else InvalidArgument naming the first bad field, its
// value and the allowed range (e.g. "temperature -0.5 is out of range: must be
// >= 0"). NaN and infinite floats are rejected. `vocab_size` must be >= 1
// (CHECK: it comes from the model, not the request).
absl::Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size);

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_SAMPLING_PARAMS_H_
