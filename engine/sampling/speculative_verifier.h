// SpeculativeVerifier: the target side of speculative decoding. Given the
// target's logits at the g+1 positions of a verification step (before the
// first draft token d_1, then after each d_i) and the draft's probabilities,
// it decides how many drafts to accept and which token comes after them, so
// that the emitted tokens follow exactly the distribution the target alone
// would have sampled (speculative sampling: Leviathan et al. 2023, Chen et
// al. 2023).
//
// For i = 1..g, with p_i the target's processed distribution at position i
// exactly as Sampler would draw from it (min-tokens mask, penalties over the
// prompt and the output INCLUDING d_1..d_{i-1}, temperature, top-k, top-p,
// min-p; row_sampler.h) and q_i the draft's (DraftProbs):
//   greedy (temperature < kGreedyTemperature): accept d_i iff it is the token
//     the Sampler would choose (argmax, ties to the lowest id); otherwise
//     emit that token and stop.
//   sampling: accept d_i iff u < p_i(d_i) / q_i(d_i), u = UniformDraw(seed,
//     stream, step, kSpeculativeAccept) with step = the output position of
//     d_i; on the first rejection emit a token drawn from
//     normalize(max(0, p_i - q_i)) with u' = UniformDraw(..., step,
//     kSpeculativeResidual) (inverse CDF over token ids ascending) and stop.
// When all g drafts are accepted, the bonus token is what the Sampler would
// draw at position g+1 (same stages, same UniformDraw step). Every emitted
// token carries its raw logprob and top logprobs as SampleResult does.
//
// Degenerate rows do not fail: where processing leaves no candidate, the
// Sampler would emit the raw argmax whatever the draw, so p_i is one-hot at
// it and d_i is accepted iff it is that token; where the residual has no
// mass (p_i <= q_i everywhere, reachable only by rounding, or NaN inputs),
// the position is sampled as the Sampler would (its own UniformDraw).
//
// Thread-safety: VerifyBatch may be called by one thread at a time; inside
// it, rows run in parallel on the pool.
#ifndef TANDEM_ENGINE_SAMPLING_SPECULATIVE_VERIFIER_H_
#define TANDEM_ENGINE_SAMPLING_SPECULATIVE_VERIFIER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "engine/sampling/sampler.h"

namespace tandem::sampling {

class CandidateList;

// The draft's distribution q at one drafted token d.
struct DraftProbs {
  // q(d): the probability the draft drew d with, in (0, 1]. Must be 1 when
  // the support is empty.
  float prob = 1.0f;
  // The draft's processed distribution at this position over its support
  // (the tokens it could have drawn; d among them), probabilities in [0, 1]
  // pairing one to one with the tokens. q(d) is read from `prob`. Empty:
  // q is one-hot at d (a deterministic draft: greedy or n-gram).
  std::vector<int32_t> support_tokens;
  std::vector<float> support_probs;
};

// OK when `probs` is a well-formed q for draft token `token`, else
// InvalidArgument naming the field, its value and the limit: token outside
// [0, vocab_size); prob not in (0, 1], or not 1 with an empty support;
// support_tokens and support_probs of different lengths; a support token
// outside [0, vocab_size); a support probability not in [0, 1] (NaN
// included); `token` missing from a non-empty support. Callers prefix the
// sequence and draft index.
absl::Status ValidateDraftProbs(int32_t token, const DraftProbs& probs, int32_t vocab_size);

// One sequence's verification input. Views only; the caller keeps the data
// alive for the duration of VerifyBatch.
struct VerifyRow {
  // As for Sampler::SampleBatch (params, prompt and output history before
  // d_1, seed, stream, EOS ids), except that `logits` points at
  // [draft_tokens.size() + 1, vocab_size]: row i holds the target's raw
  // logits at the position that predicts draft_tokens[i]; the last row the
  // position after the last draft. params->beam_candidates must be 0.
  SamplingRow target;
  std::span<const int32_t> draft_tokens;      // d_1..d_g, each in [0, vocab_size)
  std::span<const DraftProbs> draft_probs;    // one per draft token (ValidateDraftProbs)
};

struct VerifyResult {
  // The accepted drafts d_1..d_k (k in [0, g]) with their logprobs.
  std::vector<SampleResult> accepted;
  // The token emitted after them: the correction at the first rejection
  // (k < g) or the bonus token (k == g). The step emits accepted + [next].
  SampleResult next;
};

class SpeculativeVerifier {
 public:
  // `vocab_size` >= 1 (CHECK).
  explicit SpeculativeVerifier(int32_t vocab_size);
  ~SpeculativeVerifier();
  SpeculativeVerifier(const SpeculativeVerifier&) = delete;
  SpeculativeVerifier& operator=(const SpeculativeVerifier&) = delete;

  // Verifies each row into the result at the same index; rows are
  // independent (a row's result is a function of that row alone). `pool`
  // may be null. Programmer errors CHECK-fail: sizes differ, null pointers,
  // draft_probs not one per draft token, a beam row, token ids out of range.
  // With no draft tokens a row is sampled exactly as SampleBatch would.
  void VerifyBatch(std::span<const VerifyRow> rows, std::span<VerifyResult> results,
                   ThreadPool* pool);

  // One position of a verification on its own: `row` is the target's raw
  // logits there with the history before row.draft_token (the accepted
  // drafts included) and row.draft_probs its q. result->draft_accepted
  // says whether the draft is accepted; result->token is then the draft,
  // else the correction emitted instead, with its logprobs — what
  // VerifyBatch decides at that position. The caller walks the positions
  // (the device sampler's fallback: device/device_sampler.h). CHECK-fails on
  // a beam row, missing draft_probs or a draft token out of range.
  void VerifyPosition(const SamplingRow& row, SampleResult* result);

 private:
  struct Worker;  // one pool thread's RowSampler and scratch

  void VerifyRowOn(const VerifyRow& row, VerifyResult* result, Worker* worker) const;
  // The decision at one position: `at` without a draft of its own (the
  // Sampler's row), `d` and `q` the draft there.
  void VerifyAt(const SamplingRow& at, int32_t d, const DraftProbs& q, SampleResult* emitted,
                Worker* worker) const;
  // Draws from normalize(max(0, p - q)) over `candidates` (p) and `probs`
  // (q at `token`); -1 when the residual has no mass.
  int32_t DrawResidual(const CandidateList& candidates, int32_t token,
                       const DraftProbs& probs, double u, Worker* worker) const;

  int32_t vocab_size_;
  std::vector<std::unique_ptr<Worker>> workers_;  // one per pool thread index
};

}  // namespace tandem::sampling

#endif  // TANDEM_ENGINE_SAMPLING_SPECULATIVE_VERIFIER_H_
