// Sampler: turns one row of raw logits per sequence into the next token, its
// logprob and the top alternatives, for a whole batch at once.
//
// Per row: copy the raw logits, apply the stages of logits_processor.h in
// their documented order, then either take the argmax (temperature 0) or draw
// by inverse CDF with u = UniformDraw(seed, stream, output_tokens.size()) over
// the surviving candidates in canonical order (probability descending, token
// ascending). A row's result is a function of that row alone: of its logits,
// params, token history and RNG identity, never of the other rows, the
// thread that ran it, or the pool size.
//
// Logprobs follow vLLM's default: log_softmax of the RAW logits (before
// penalties, temperature and truncation), for the chosen token and for the
// params.logprobs most likely raw tokens.
//
// Thread-safety: SampleBatch may be called by one thread at a time (it owns
// the per-thread scratch); inside it, rows run in parallel on the pool.
#ifndef TANDEM_ENGINE_SAMPLING_SAMPLER_H_
#define TANDEM_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "engine/sampling/sampling_params.h"

namespace tandem::sampling {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct DraftProbs;  // speculative_verifier.h

// One sequence's input to a sampling step. Views only; the caller keeps the
// pointed-to data alive for the duration of SampleBatch.
struct SamplingRow {
  const float* logits = nullptr;           // [vocab_size], raw model output (not modified)
  const SamplingParams* params = nullptr;  // validated (ValidateSamplingParams) by the caller
  std::span<const int32_t> prompt_tokens = {};  // for the repetition penalty
  std::span<const int32_t> output_tokens = {};  // generated so far (penalties, min_tokens, RNG step)
  uint64_t seed = 0;                       // RNG identity: the request's seed...
  uint64_t stream = 0;                     // ...and the sample index (n > 1)
  // EOS ids: masked, together with params->stop_token_ids, while
  // output_tokens.size() < params->min_tokens, unless params->ignore_eos (then
  // EOS does not stop the sequence, so it is never masked).
  std::span<const int32_t> eos_token_ids = {};
  // Speculative verification at this position (SpeculativeVerifier::
  // VerifyPosition, device::DeviceSampler): the drafted token in [0,
  // vocab_size) and the draft's distribution there. -1 for every row given
  // to Sampler (it CHECKs so).
  int32_t draft_token = -1;
  const DraftProbs* draft_probs = nullptr;
};

// A beam-search candidate: a next token with its processed log-probability
// (`score`) and the key it is selected by (the score, or score + Gumbel noise
// when beam sampling). See beam_candidates.h.
struct BeamToken {
  int32_t token = 0;
  float score = 0.0f;
  float key = 0.0f;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // log_softmax of the raw logits at `token`
  // The params->logprobs highest raw logprobs, descending (ties: lower id
  // first). Empty when params->logprobs == 0.
  std::vector<TokenLogprob> top_logprobs;
  // params->beam_candidates > 0 only: the best next tokens by key (then
  // `token` is the first of them and nothing was sampled).
  std::vector<BeamToken> beam_candidates;
  // Rows with a draft_token: whether the verifier accepted it (then `token`
  // is the draft; else `token` is the correction it emits instead).
  bool draft_accepted = false;
};

// A given token to score at one position (prompt logprobs): the raw logits
// of the position before it.
struct ScoreRow {
  const float* logits = nullptr;  // [vocab_size], raw model output
  int32_t token = 0;              // in [0, vocab_size)
  int32_t num_top = 0;            // top alternatives wanted, >= 0
};

class RowSampler;

class Sampler {
 public:
  // `vocab_size` >= 1 (CHECK): the length of every logits row.
  explicit Sampler(int32_t vocab_size);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  int32_t vocab_size() const { return vocab_size_; }

  // Samples one token per row into the result at the same index. Rows are
  // independent. `pool` may be null (rows run on the caller). Scratch buffers
  // are reused across calls. Programmer errors CHECK-fail: sizes differ, a
  // null logits/params pointer, a token id outside [0, vocab_size).
  //
  // When processing leaves no candidate (every logit -inf or NaN after
  // masking), the row falls back to the argmax of the raw logits (token 0 if
  // those are all NaN/-inf too) rather than failing the whole batch.
  void SampleBatch(std::span<const SamplingRow> rows, std::span<SampleResult> results,
                   ThreadPool* pool);

  // Scores each row's given token into the result at the same index: its
  // raw logprob and the row's num_top most likely tokens, exactly as
  // SampleBatch reports a sampled token's. Same threading and CHECKs.
  void ScoreBatch(std::span<const ScoreRow> rows, std::span<SampleResult> results,
                  ThreadPool* pool);

 private:
  // Runs row_fn(sampler, i) for every i in [0, n) on the pool (or the
  // caller), with the calling thread's RowSampler.
  template <typename RowFn>
  void ForEachRow(size_t n, ThreadPool* pool, RowFn row_fn);

  int32_t vocab_size_;
  // One per pool thread index, created on first use (each holds
  // vocabulary-sized working memory).
  std::vector<std::unique_ptr<RowSampler>> row_samplers_;
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_SAMPLER_H_
