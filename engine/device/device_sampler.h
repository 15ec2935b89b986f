// DeviceSampler: the Sampler's choice of token (engine/sampling/sampler.h)
// for logits rows that stay in device memory; only the tokens and their
// logprobs come back to the host. Per row, on the device:
//   1. the min-tokens mask (stop ids, and EOS unless ignore_eos, -> -inf
//      while the output is shorter than min_tokens)       MaskLogits
//   2-4. repetition / frequency / presence penalties and temperature
//                                                          ApplyPenaltiesAndTemperature
//   then greedy rows (temperature < kGreedyTemperature) take the processed
//   argmax (TopKTopP with k = 1: the lowest id among ties), sampling rows
//   5-8 and the seeded draw: TopKTopP + DrawTokens when 1 <= top_k <=
//   kTopKMaxCandidates, VocabDraw otherwise;
//   the token's logprob: log_softmax of the raw row (LogSoftmaxNormalizers,
//   GatherLogits), as the CPU reports it.
// Beam-search rows (params.beam_candidates > 0) take the CPU's
// ComputeBeamCandidates instead: log_softmax of the raw row
// (LogSoftmaxRows), the penalties and min-tokens mask on it, then
//   without beam_sample: the beam_candidates best scores, ties by lower id
//   (TopKTopP with k = beam_candidates, top-p off: the first k of the kept
//   set in canonical order) with their scores (GatherKeptCandidates); key =
//   score;
//   beam sampling (beam_sample.cuh): temperature, then the warpers' kept set
//   (TopKTopP with k = max(top_k, 2) cut by top-p and min-p when top_k is
//   in [1, kTopKMaxCandidates]; else the whole row's, as VocabDraw cuts
//   it, at least two kept), Gumbel keys on it into keys_, and the
//   beam_candidates best keys (TopKTopP over the keys) with their scores
//   and keys;
// `token` the best candidate.
// Rows with a draft to verify (row.draft_token >= 0: one position of
// speculative verification, SpeculativeVerifier::VerifyPosition): greedy
// rows accept the draft iff it is the argmax above; sampling rows take
// VerifyDrafts (verify_draft.cuh) on the candidate kernel's kept list, or
// VocabDraw's verification (vocab_draw.cuh) over the whole vocabulary, with
// the draft's q: accept d iff u * q(d) < p(d), else the residual draw over
// max(0, p - q), else (no residual mass) the draw above. The result's token
// is the emitted one, draft_accepted the verdict.
// Top logprobs (params.logprobs > 0, any row the device takes): the
// logprobs highest raw logits (TopKTopP on the raw row with k = logprobs,
// top-p off: the first k of the kept set, ties by lower id, as the CPU's
// partial sort), gathered with GatherKeptCandidates and turned into
// logprobs on the host with the row's normalizer, as the chosen token's.
// The raw logits are not modified (the stages work on a copy).
//
// Rows left to the host (results[i].token = -1, i listed in `host_rows`):
// beam sampling over a raw +inf (which the candidate order clamps and the
// CPU's warpers do not); beams wider than kTopKMaxCandidates; draft rows
// whose draft supports overflow the call's max_rows * vocab_size entries
// (only supports holding tokens outside the vocabulary can); draft rows of
// beam search (which the scheduler never makes); and rows the device could
// not decide (no live logit after processing, where the CPU takes the raw
// argmax; more than kTopKMaxCandidates logits tied into a top-k set; top
// logprobs of a raw row with fewer than `logprobs` live logits (neither
// -inf nor NaN), where the CPU lists dead tokens too, or with a +inf logit,
// which the candidate order ties with the largest float). The caller
// samples those with the CPU Sampler on their raw logits (draft rows with
// VerifyPosition).
//
// Same tokens as the CPU: the stages are the CPU's (penalties bit-identical;
// expf and the order of the sums may differ on a GPU within rounding, see
// top_k.cuh and vocab_draw.cuh; a beam row's log_softmax subtracts the same
// double normalizer, whose sum runs in tree order; beam sampling's Gumbel
// log and whole-row top-p, see beam_sampling.h and beam_sample.cuh); one
// difference by design: a greedy row whose largest logits are +inf and
// FLT_MAX ties them (+inf is clamped, as the CPU's candidate list does),
// where the CPU's argmax prefers +inf.
//
// Memory: every buffer at Create, for `max_rows` rows and `max_tokens`
// history tokens (prompt + output, summed over a call's rows); Sample
// allocates no device memory.
//
// Thread-safety: one Sample at a time (it owns the buffers).
#ifndef TANDEM_ENGINE_DEVICE_DEVICE_SAMPLER_H_
#define TANDEM_ENGINE_DEVICE_DEVICE_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampling/sampler.h"
#include "kernels/cuda/runtime/device_buffer.h"
#include "kernels/cuda/sampling/beam_sample.cuh"
#include "kernels/cuda/sampling/verify_draft.cuh"
#include "kernels/cuda/sampling/vocab_draw.cuh"

namespace tandem::device {

class DeviceSampler {
 public:
  // INVALID_ARGUMENT for sizes < 1; RESOURCE_EXHAUSTED when device memory
  // runs out.
  static absl::StatusOr<DeviceSampler> Create(int32_t max_rows, int32_t vocab_size,
                                              int64_t max_tokens);

  // Samples rows[i] from row logit_rows[i] of `logits` (device, [*,
  // vocab_size]); rows[i].logits is not read. results[i] gets the token and
  // its logprob, its top_logprobs when params.logprobs > 0 (and a beam row
  // its beam_candidates), or token -1
  // for a row left to the host, whose index i is appended to *host_rows.
  // INVALID_ARGUMENT when rows exceed max_rows, their histories max_tokens,
  // or the spans' sizes differ; INTERNAL for a CUDA error. Returns when the
  // results are on the host.
  absl::Status Sample(const float* logits, std::span<const int64_t> logit_rows,
                      std::span<const sampling::SamplingRow> rows,
                      std::span<sampling::SampleResult> results, std::vector<int32_t>* host_rows,
                      cudaStream_t stream);

 private:
  DeviceSampler() = default;
  // raw_ <- the rows' logits, in order.
  absl::Status GatherRows(const float* logits, std::span<const int64_t> logit_rows,
                          cudaStream_t stream);
  // Masks, penalties and temperature on processed_ (a copy of raw_).
  absl::Status Process(std::span<const sampling::SamplingRow> rows, cudaStream_t stream);
  // Tokens of the processed rows the candidate kernel takes into tokens_
  // (kNoDraw where undecided); plans the others' VocabDraw (vocab_host_).
  absl::Status Draw(std::span<const sampling::SamplingRow> rows, cudaStream_t stream);
  // TopKTopP over `logits` (device, [rows.size(), vocab]) with `rows` into
  // the kept_* buffers.
  absl::Status KeepCandidates(const float* logits, const std::vector<cuda::TopKRowParams>& rows,
                              cudaStream_t stream);
  // VocabDraw over the rows Draw left to it, verifying their drafts.
  absl::Status DrawWholeVocabularyRows(int32_t num_rows, cudaStream_t stream);
  // host_ <- the rows left to the host; beam_width_ <- the widest
  // beam_candidates of the others (0: no beam row); the sampled draft rows'
  // parameters and supports into verify_host_ / support_*_host_.
  // INVALID_ARGUMENT for a draft row without draft_probs.
  absl::Status PlanHostRows(std::span<const sampling::SamplingRow> rows);
  // VerifyDrafts over the sampled draft rows (tokens_, accepted_).
  absl::Status VerifySampledDrafts(int32_t num_rows, cudaStream_t stream);
  // What a call brings back to the host, and its results from them.
  struct HostCopies;
  absl::Status CopyResults(int32_t n, cudaStream_t stream, HostCopies* out) const;
  void FillResults(std::span<const sampling::SamplingRow> rows, const HostCopies& copies,
                   std::span<sampling::SampleResult> results,
                   std::vector<int32_t>* host_rows) const;
  // beam_tokens_ / beam_scores_ <- the first `width` kept candidates of
  // every row of the last Draw, with their processed scores.
  absl::Status GatherBeamCandidates(int32_t num_rows, int32_t width, cudaStream_t stream);
  // Whether a beam-sampling row's top-k set is the candidate kernel's kept
  // list (top_k in [1, kTopKMaxCandidates]); else SampleBeams takes the
  // whole row.
  static bool BeamSampleKeptList(const sampling::SamplingParams& p);
  // Appends row r to beam_sample_host_ / beam_sample_best_ when it samples
  // beams.
  void PlanBeamSample(int32_t r, const sampling::SamplingRow& row);
  // The beam-sampling rows' candidates into beam_tokens_ / beam_scores_ /
  // beam_keys_ and their best into tokens_ (beam_sample.cuh). Reuses the
  // kept_* buffers, after the stages that read them.
  absl::Status SampleBeams(cudaStream_t stream);
  // top_tokens_ / top_raw_ <- each row's params.logprobs highest raw
  // logits (top_width_ per row; none when top_width_ is 0). Reuses the
  // kept_* buffers, after the stages that read them.
  absl::Status RankTopLogprobs(std::span<const sampling::SamplingRow> rows, cudaStream_t stream);
  // The row's top logprobs from the copies into *result; false when the
  // device's list may differ from the CPU's (see the file comment).
  bool FillTopLogprobs(size_t r, const sampling::SamplingRow& row, const HostCopies& copies,
                       sampling::SampleResult* result) const;

  int32_t max_rows_ = 0;
  int32_t vocab_size_ = 0;
  int64_t max_tokens_ = 0;
  cuda::DeviceBuffer raw_;            // [max_rows, vocab] f32, the rows as given
  cuda::DeviceBuffer processed_;      // [max_rows, vocab] f32
  cuda::DeviceBuffer workspace_;      // the penalties' scratch, all zero between calls
  cuda::DeviceBuffer token_ids_;      // [max_tokens] histories
  cuda::DeviceBuffer mask_;           // [max_rows * kMaxMaskIds] flat positions
  cuda::DeviceBuffer logit_rows_;     // [max_rows] LogitsRowParams
  cuda::DeviceBuffer top_k_rows_;     // [max_rows] TopKRowParams
  cuda::DeviceBuffer draw_rows_;      // [max_rows] DrawRowParams
  cuda::DeviceBuffer vocab_rows_;     // [max_rows] VocabDrawRowParams
  cuda::DeviceBuffer kept_tokens_;    // [max_rows, kTopKMaxCandidates]
  cuda::DeviceBuffer kept_weights_;   // [max_rows, kTopKMaxCandidates]
  cuda::DeviceBuffer kept_results_;   // [max_rows] TopKRowResult
  cuda::DeviceBuffer tokens_;         // [max_rows] int32
  cuda::DeviceBuffer normalizers_;    // [max_rows] LogSoftmaxNormalizerResult
  cuda::DeviceBuffer raw_at_token_;   // [max_rows] f32
  cuda::DeviceBuffer beam_rows_;      // [max_rows] int32: rows to log_softmax
  cuda::DeviceBuffer beam_tokens_;    // [max_rows, width <= kTopKMaxCandidates] int32
  cuda::DeviceBuffer beam_scores_;    // [max_rows, width] f32
  cuda::DeviceBuffer beam_keys_;      // [max_rows, width] f32 (beam sampling)
  cuda::DeviceBuffer keys_;           // [max_rows, vocab] f32 beam sampling's keys
  cuda::DeviceBuffer beam_sample_rows_;  // [max_rows] BeamSampleRowParams
  cuda::DeviceBuffer verify_rows_;    // [max_rows] VerifyDraftRowParams
  cuda::DeviceBuffer support_tokens_;  // [max_rows * vocab] int32
  cuda::DeviceBuffer support_probs_;   // [max_rows * vocab] f32
  cuda::DeviceBuffer accepted_;        // [max_rows] int32 verdicts
  cuda::DeviceBuffer top_tokens_;      // [max_rows, width <= kMaxLogprobs] int32
  cuda::DeviceBuffer top_raw_;         // [max_rows, width] f32 raw logits
  // Per call (PlanHostRows), reused.
  std::vector<bool> host_;
  std::vector<cuda::VerifyDraftRowParams> verify_host_;
  std::vector<cuda::VocabDrawRowParams> vocab_host_;
  bool any_vocab_ = false;
  std::vector<int32_t> support_tokens_host_;
  std::vector<float> support_probs_host_;
  std::vector<std::pair<int32_t, float>> support_scratch_;  // AppendSupport's
  std::vector<cuda::BeamSampleRowParams> beam_sample_host_;
  std::vector<cuda::TopKRowParams> beam_sample_best_;  // k = beam_candidates
  int32_t beam_width_ = 0;
  int32_t top_width_ = 0;  // the most top logprobs a device row asks for
  bool any_sampled_draft_ = false;
};

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DEVICE_SAMPLER_H_
