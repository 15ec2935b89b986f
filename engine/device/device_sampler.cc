#include "engine/device/device_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/sampling/logits_processor.h"
#include "engine/sampling/speculative_verifier.h"
#include "kernels/beam_sampling.h"
#include "kernels/cuda/sampling/logits.cuh"
#include "kernels/cuda/sampling/sample_draw.cuh"
#include "kernels/cuda/sampling/top_k.cuh"
#include "kernels/cuda/sampling/verify_draft.cuh"
#include "kernels/cuda/sampling/vocab_draw.cuh"

namespace tandem::device {
namespace {

// Min-tokens mask ids (stop ids + EOS ids) a row may have on the device; a
// row with more is left to the host.
constexpr int32_t kMaxMaskIdsPerRow = 64;

// A beam-search row the device ranks (host rows excluded by the caller).
bool Beam(const sampling::SamplingParams& p) { return p.beam_candidates > 0; }

// The top logprobs a row asks for (the CPU lists at most the vocabulary).
int32_t TopWidth(const sampling::SamplingParams& p, int32_t vocab_size) {
  return std::clamp(p.logprobs, 0, vocab_size);
}

bool Greedy(const sampling::SamplingParams& p) {
  return p.temperature < sampling::kGreedyTemperature;
}

// Candidate-kernel rows: beams, greedy (k = 1) and top-k within its capacity.
bool UsesTopKKernel(const sampling::SamplingParams& p) {
  return Beam(p) || Greedy(p) || (p.top_k >= 1 && p.top_k <= cuda::kTopKMaxCandidates);
}

// Rows the device never takes (see the header), whatever the batch.
bool HostOnly(const sampling::SamplingRow& row) {
  const sampling::SamplingParams& p = *row.params;
  const int64_t mask_ids = static_cast<int64_t>(p.stop_token_ids.size()) +
                           static_cast<int64_t>(row.eos_token_ids.size());
  const bool host_beam = Beam(p) && p.beam_candidates > cuda::kTopKMaxCandidates;
  // A draft is verified over the candidate kernel's kept list or VocabDraw's
  // kept set; a beam row has no draft to verify.
  const bool host_draft = row.draft_token >= 0 && Beam(p);
  return host_beam || host_draft || p.logprobs > sampling::kMaxLogprobs ||
         mask_ids > kMaxMaskIdsPerRow;
}

// A sampling row with a draft to verify by VerifyDrafts or VocabDraw (greedy rows compare
// the argmax with the draft on the host).
bool SampledDraft(const sampling::SamplingRow& row) {
  return row.draft_token >= 0 && !Greedy(*row.params);
}

// The draft's support sorted by token, each once, later entries winning as
// in the CPU verifier's dense q (q(d) itself is taken from `prob`).
// `entries` is scratch.
void AppendSupport(const sampling::SamplingRow& row,
                   std::vector<std::pair<int32_t, float>>& entries, std::vector<int32_t>* tokens,
                   std::vector<float>* probs) {
  const sampling::DraftProbs& q = *row.draft_probs;
  entries.clear();
  for (size_t j = 0; j < q.support_tokens.size(); ++j) {
    entries.emplace_back(q.support_tokens[j], q.support_probs[j]);
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t j = 0; j < entries.size(); ++j) {
    if (j + 1 < entries.size() && entries[j + 1].first == entries[j].first) continue;
    tokens->push_back(entries[j].first);
    probs->push_back(entries[j].second);
  }
}

template <typename T>
absl::Status Download(const cuda::DeviceBuffer& buffer, std::vector<T>* host, size_t n,
                      cudaStream_t stream) {
  host->resize(n);
  if (n == 0) return absl::OkStatus();
  if (cudaMemcpyAsync(host->data(), buffer.data(), n * sizeof(T), cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("device sampler: copy to host: %s",
                                               cudaGetErrorString(cudaGetLastError())));
  }
  return absl::OkStatus();
}

}  // namespace

struct DeviceSampler::HostCopies {
  std::vector<int32_t> tokens;
  std::vector<cuda::LogSoftmaxNormalizerResult> norms;
  std::vector<float> raw;
  std::vector<int32_t> beam_tokens;
  std::vector<float> beam_scores;
  std::vector<float> beam_keys;  // when a row samples beams
  std::vector<int32_t> accepted;
  std::vector<int32_t> top_tokens;
  std::vector<float> top_raw;
};

absl::StatusOr<DeviceSampler> DeviceSampler::Create(int32_t max_rows, int32_t vocab_size,
                                                    int64_t max_tokens) {
  if (max_rows < 1 || vocab_size < 1 || max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device sampler: max_rows %d, vocab_size %d and max_tokens %d must be >= 1",
                        max_rows, vocab_size, max_tokens));
  }
  DeviceSampler s;
  s.max_rows_ = max_rows;
  s.vocab_size_ = vocab_size;
  s.max_tokens_ = max_tokens;
  const int64_t rows = max_rows;
  const int64_t candidates = rows * cuda::kTopKMaxCandidates;
  auto alloc = [](int64_t bytes, const char* what) {
    return cuda::DeviceBuffer::Allocate(bytes, what);
  };
  ASSIGN_OR_RETURN(s.raw_, alloc(rows * vocab_size * 4, "sampler logits"));
  ASSIGN_OR_RETURN(s.processed_, alloc(rows * vocab_size * 4, "sampler logits"));
  const int64_t workspace_bytes = cuda::LogitsPenaltyWorkspaceBytes(max_rows, vocab_size);
  ASSIGN_OR_RETURN(s.workspace_, alloc(workspace_bytes, "sampler penalty scratch"));
  if (cudaMemset(s.workspace_.data(), 0, workspace_bytes) != cudaSuccess) {
    return absl::InternalError("device sampler: clearing the penalty scratch failed");
  }
  ASSIGN_OR_RETURN(s.token_ids_, alloc(max_tokens * 4, "sampler histories"));
  ASSIGN_OR_RETURN(s.mask_, alloc(rows * kMaxMaskIdsPerRow * 8, "sampler mask"));
  ASSIGN_OR_RETURN(s.logit_rows_, alloc(rows * sizeof(cuda::LogitsRowParams), "sampler rows"));
  ASSIGN_OR_RETURN(s.top_k_rows_, alloc(rows * sizeof(cuda::TopKRowParams), "sampler rows"));
  ASSIGN_OR_RETURN(s.draw_rows_, alloc(rows * sizeof(cuda::DrawRowParams), "sampler rows"));
  ASSIGN_OR_RETURN(s.vocab_rows_, alloc(rows * sizeof(cuda::VocabDrawRowParams), "sampler rows"));
  ASSIGN_OR_RETURN(s.kept_tokens_, alloc(candidates * 4, "sampler candidates"));
  ASSIGN_OR_RETURN(s.kept_weights_, alloc(candidates * 4, "sampler candidates"));
  ASSIGN_OR_RETURN(s.kept_results_, alloc(rows * sizeof(cuda::TopKRowResult), "sampler rows"));
  ASSIGN_OR_RETURN(s.tokens_, alloc(rows * 4, "sampler tokens"));
  ASSIGN_OR_RETURN(s.normalizers_,
                   alloc(rows * sizeof(cuda::LogSoftmaxNormalizerResult), "sampler logprobs"));
  ASSIGN_OR_RETURN(s.raw_at_token_, alloc(rows * 4, "sampler logprobs"));
  ASSIGN_OR_RETURN(s.beam_rows_, alloc(rows * 4, "sampler beam rows"));
  ASSIGN_OR_RETURN(s.beam_tokens_, alloc(candidates * 4, "sampler beam candidates"));
  ASSIGN_OR_RETURN(s.beam_scores_, alloc(candidates * 4, "sampler beam candidates"));
  ASSIGN_OR_RETURN(s.beam_keys_, alloc(candidates * 4, "sampler beam candidates"));
  ASSIGN_OR_RETURN(s.keys_, alloc(rows * vocab_size * 4, "sampler beam keys"));
  ASSIGN_OR_RETURN(s.beam_sample_rows_,
                   alloc(rows * sizeof(cuda::BeamSampleRowParams), "sampler beam rows"));
  ASSIGN_OR_RETURN(s.verify_rows_,
                   alloc(rows * sizeof(cuda::VerifyDraftRowParams), "sampler draft rows"));
  // A row's support, deduplicated, holds at most the vocabulary (a draft
  // sampled with top-k off spans all of it).
  const int64_t supports = rows * vocab_size;
  ASSIGN_OR_RETURN(s.support_tokens_, alloc(supports * 4, "sampler draft supports"));
  ASSIGN_OR_RETURN(s.support_probs_, alloc(supports * 4, "sampler draft supports"));
  ASSIGN_OR_RETURN(s.accepted_, alloc(rows * 4, "sampler draft verdicts"));
  ASSIGN_OR_RETURN(s.top_tokens_, alloc(rows * sampling::kMaxLogprobs * 4, "sampler logprobs"));
  ASSIGN_OR_RETURN(s.top_raw_, alloc(rows * sampling::kMaxLogprobs * 4, "sampler logprobs"));
  return s;
}

absl::Status DeviceSampler::GatherRows(const float* logits, std::span<const int64_t> logit_rows,
                                       cudaStream_t stream) {
  const int64_t row_bytes = int64_t{vocab_size_} * 4;
  // One copy per run of consecutive rows (a decode step's rows are one run).
  for (size_t begin = 0, end = 0; begin < logit_rows.size(); begin = end) {
    end = begin + 1;
    while (end < logit_rows.size() && logit_rows[end] == logit_rows[end - 1] + 1) ++end;
    if (cudaMemcpyAsync(raw_.as<float>() + static_cast<int64_t>(begin) * vocab_size_,
                        logits + logit_rows[begin] * vocab_size_,
                        static_cast<int64_t>(end - begin) * row_bytes, cudaMemcpyDeviceToDevice,
                        stream) != cudaSuccess) {
      return absl::InternalError("device sampler: gathering the logits rows failed");
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::Process(std::span<const sampling::SamplingRow> rows,
                                    cudaStream_t stream) {
  const int32_t n = static_cast<int32_t>(rows.size());
  if (cudaMemcpyAsync(processed_.data(), raw_.data(), int64_t{n} * vocab_size_ * 4,
                      cudaMemcpyDeviceToDevice, stream) != cudaSuccess) {
    return absl::InternalError("device sampler: copying the logits failed");
  }
  std::vector<int64_t> mask;
  std::vector<int32_t> ids;
  std::vector<int32_t> beam_rows;
  std::vector<cuda::LogitsRowParams> params;
  for (int32_t r = 0; r < n; ++r) {
    const sampling::SamplingRow& row = rows[r];
    const sampling::SamplingParams& p = *row.params;
    const int64_t base = int64_t{r} * vocab_size_;
    if (!host_[r] && Beam(p)) beam_rows.push_back(r);
    if (!host_[r] && static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
      for (int32_t id : p.stop_token_ids) mask.push_back(base + id);
      if (!p.ignore_eos) {
        for (int32_t id : row.eos_token_ids) mask.push_back(base + id);
      }
    }
    cuda::LogitsRowParams lp;
    lp.repetition_penalty = p.repetition_penalty;
    lp.frequency_penalty = p.frequency_penalty;
    lp.presence_penalty = p.presence_penalty;
    // Greedy rows and beams rank at temperature 1; beam sampling's warpers
    // start with the temperature.
    const bool unscaled = Beam(p) ? !p.beam_sample : Greedy(p);
    lp.temperature = unscaled ? 1.0f : p.temperature;
    lp.prompt_begin = static_cast<int32_t>(ids.size());
    lp.prompt_len = static_cast<int32_t>(row.prompt_tokens.size());
    ids.insert(ids.end(), row.prompt_tokens.begin(), row.prompt_tokens.end());
    lp.output_begin = static_cast<int32_t>(ids.size());
    lp.output_len = static_cast<int32_t>(row.output_tokens.size());
    ids.insert(ids.end(), row.output_tokens.begin(), row.output_tokens.end());
    params.push_back(lp);
  }
  if (static_cast<int64_t>(ids.size()) > max_tokens_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device sampler: the rows' histories hold %d tokens, over its max_tokens %d", ids.size(),
        max_tokens_));
  }
  // A beam row's penalties and mask apply to its log_softmax (the mask
  // commutes with the penalties: -inf stays -inf).
  RETURN_IF_ERROR(beam_rows_.UploadAll(beam_rows, stream));
  RETURN_IF_ERROR(cuda::LogSoftmaxRows(
      processed_.as<float>(), normalizers_.as<cuda::LogSoftmaxNormalizerResult>(),
      beam_rows_.as<int32_t>(), static_cast<int32_t>(beam_rows.size()), vocab_size_, stream));
  RETURN_IF_ERROR(mask_.UploadAll(mask, stream));
  RETURN_IF_ERROR(cuda::MaskLogits(processed_.as<float>(), mask_.as<int64_t>(),
                                   static_cast<int32_t>(mask.size()), stream));
  RETURN_IF_ERROR(token_ids_.UploadAll(ids, stream));
  RETURN_IF_ERROR(logit_rows_.UploadAll(params, stream));
  return cuda::ApplyPenaltiesAndTemperature(
      {processed_.as<float>(), logit_rows_.as<cuda::LogitsRowParams>(), token_ids_.as<int32_t>(),
       workspace_.as<int32_t>(), n, vocab_size_},
      stream);
}

absl::Status DeviceSampler::Draw(std::span<const sampling::SamplingRow> rows,
                                 cudaStream_t stream) {
  const int32_t n = static_cast<int32_t>(rows.size());
  std::vector<cuda::TopKRowParams> top_k(n);
  std::vector<cuda::DrawRowParams> draw(n);
  std::vector<cuda::VocabDrawRowParams>& vocab = vocab_host_;
  vocab.assign(n, {});
  any_vocab_ = false;
  for (int32_t r = 0; r < n; ++r) {
    const sampling::SamplingParams& p = *rows[r].params;
    draw[r] = {.seed = rows[r].seed,
               .stream = rows[r].stream,
               .step = rows[r].output_tokens.size(),
               .argmax = Greedy(p) || Beam(p)};
    vocab[r].skip = UsesTopKKernel(p);
    if (Beam(p) && p.beam_sample) {
      // The warpers' top-k set (SampleBeams cuts and keys it); a row
      // SampleBeams takes whole is reported unsupported at once.
      top_k[r] = {BeamSampleKeptList(p) ? std::max(p.top_k, kernels::kBeamMinTokensToKeep) : 0,
                  1.0f, 0.0f};
    } else if (Beam(p)) {
      // The beam_candidates best scores (ties kept past k; the first k taken).
      top_k[r] = {std::min(p.beam_candidates, cuda::kTopKMaxCandidates), 1.0f, 0.0f};
    } else if (vocab[r].skip) {
      // k 1 for a greedy row: the largest logits, ties kept, lowest id first.
      top_k[r] = Greedy(p) ? cuda::TopKRowParams{1, 1.0f, 0.0f}
                           : cuda::TopKRowParams{p.top_k, p.top_p, p.min_p};
    } else {
      top_k[r].top_k = 0;  // not this kernel's row: reported unsupported at once
      vocab[r] = {p.top_k, p.top_p, p.min_p, draw[r], /*skip=*/false};
      any_vocab_ = true;
    }
  }
  RETURN_IF_ERROR(draw_rows_.UploadAll(draw, stream));
  RETURN_IF_ERROR(KeepCandidates(processed_.as<float>(), top_k, stream));
  return cuda::DrawTokens(
      {kept_tokens_.as<int32_t>(), kept_weights_.as<float>(),
       kept_results_.as<cuda::TopKRowResult>(), draw_rows_.as<cuda::DrawRowParams>(),
       tokens_.as<int32_t>(), n},
      stream);
}

absl::Status DeviceSampler::KeepCandidates(const float* logits,
                                           const std::vector<cuda::TopKRowParams>& rows,
                                           cudaStream_t stream) {
  RETURN_IF_ERROR(top_k_rows_.UploadAll(rows, stream));
  return cuda::TopKTopP({logits, top_k_rows_.as<cuda::TopKRowParams>(), kept_tokens_.as<int32_t>(),
                         kept_weights_.as<float>(), kept_results_.as<cuda::TopKRowResult>(),
                         static_cast<int32_t>(rows.size()), vocab_size_},
                        stream);
}

absl::Status DeviceSampler::DrawWholeVocabularyRows(int32_t num_rows, cudaStream_t stream) {
  if (!any_vocab_) return absl::OkStatus();
  RETURN_IF_ERROR(vocab_rows_.UploadAll(vocab_host_, stream));
  cuda::VocabDrawParams params{processed_.as<float>(), vocab_rows_.as<cuda::VocabDrawRowParams>(),
                               tokens_.as<int32_t>(), num_rows, vocab_size_};
  if (any_sampled_draft_) {  // VerifySampledDrafts uploaded the drafts
    params.verify = verify_rows_.as<cuda::VerifyDraftRowParams>();
    params.support_tokens = support_tokens_.as<int32_t>();
    params.support_probs = support_probs_.as<float>();
    params.accepted = accepted_.as<int32_t>();
  }
  return cuda::VocabDraw(params, stream);
}

absl::Status DeviceSampler::PlanHostRows(std::span<const sampling::SamplingRow> rows) {
  host_.assign(rows.size(), false);
  support_tokens_host_.clear();
  support_probs_host_.clear();
  verify_host_.assign(rows.size(), {});
  bool any = false;
  beam_sample_host_.clear();
  beam_sample_best_.clear();
  beam_width_ = 0;
  top_width_ = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    host_[r] = HostOnly(rows[r]);
    if (!host_[r]) {
      PlanBeamSample(static_cast<int32_t>(r), rows[r]);
      beam_width_ = std::max(beam_width_, rows[r].params->beam_candidates);
      top_width_ = std::max(top_width_, TopWidth(*rows[r].params, vocab_size_));
    }
    if (host_[r] || !SampledDraft(rows[r])) continue;
    if (rows[r].draft_probs == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device sampler: row %d has draft token %d but no draft_probs", r, rows[r].draft_token));
    }
    const size_t begin = support_tokens_host_.size();
    AppendSupport(rows[r], support_scratch_, &support_tokens_host_, &support_probs_host_);
    const size_t len = support_tokens_host_.size() - begin;
    // Supports share one buffer of max_rows * vocab_size entries, which
    // supports within the vocabulary never overflow; a row past it (tokens
    // outside the vocabulary, which the step plan refuses) is verified on
    // the host.
    if (support_tokens_host_.size() >
        static_cast<size_t>(max_rows_) * static_cast<size_t>(vocab_size_)) {
      support_tokens_host_.resize(begin);
      support_probs_host_.resize(begin);
      host_[r] = true;
      continue;
    }
    const sampling::DraftProbs& q = *rows[r].draft_probs;
    verify_host_[r] = {.draft = rows[r].draft_token,
                       .q_draft = q.support_tokens.empty() ? 1.0f : q.prob,
                       .support_begin = static_cast<int32_t>(begin),
                       .support_len = static_cast<int32_t>(len),
                       .seed = rows[r].seed,
                       .stream = rows[r].stream,
                       .step = rows[r].output_tokens.size()};
    any = true;
  }
  any_sampled_draft_ = any;
  return absl::OkStatus();
}

absl::Status DeviceSampler::VerifySampledDrafts(int32_t num_rows, cudaStream_t stream) {
  if (!any_sampled_draft_) return absl::OkStatus();
  RETURN_IF_ERROR(verify_rows_.UploadAll(verify_host_, stream));
  RETURN_IF_ERROR(support_tokens_.UploadAll(support_tokens_host_, stream));
  RETURN_IF_ERROR(support_probs_.UploadAll(support_probs_host_, stream));
  return cuda::VerifyDrafts(
      {kept_tokens_.as<int32_t>(), kept_weights_.as<float>(),
       kept_results_.as<cuda::TopKRowResult>(), verify_rows_.as<cuda::VerifyDraftRowParams>(),
       support_tokens_.as<int32_t>(), support_probs_.as<float>(), tokens_.as<int32_t>(),
       accepted_.as<int32_t>(), num_rows},
      stream);
}

absl::Status DeviceSampler::Sample(const float* logits, std::span<const int64_t> logit_rows,
                                   std::span<const sampling::SamplingRow> rows,
                                   std::span<sampling::SampleResult> results,
                                   std::vector<int32_t>* host_rows, cudaStream_t stream) {
  const int32_t n = static_cast<int32_t>(rows.size());
  if (rows.size() > static_cast<size_t>(max_rows_) || results.size() != rows.size() ||
      logit_rows.size() != rows.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device sampler: %d rows (at most %d) with %d logits rows and %d results", rows.size(),
        max_rows_, logit_rows.size(), results.size()));
  }
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(PlanHostRows(rows));
  RETURN_IF_ERROR(GatherRows(logits, logit_rows, stream));
  // The raw rows' normalizers: the logprobs', and the beam rows' log_softmax.
  RETURN_IF_ERROR(cuda::LogSoftmaxNormalizers(
      raw_.as<float>(), n, vocab_size_, normalizers_.as<cuda::LogSoftmaxNormalizerResult>(),
      stream));
  RETURN_IF_ERROR(Process(rows, stream));
  RETURN_IF_ERROR(Draw(rows, stream));
  RETURN_IF_ERROR(VerifySampledDrafts(n, stream));
  // After VerifyDrafts, which marks VocabDraw's draft rows rejected.
  RETURN_IF_ERROR(DrawWholeVocabularyRows(n, stream));
  RETURN_IF_ERROR(GatherBeamCandidates(n, beam_width_, stream));
  RETURN_IF_ERROR(SampleBeams(stream));
  RETURN_IF_ERROR(RankTopLogprobs(rows, stream));
  RETURN_IF_ERROR(cuda::GatherLogits(raw_.as<float>(), tokens_.as<int32_t>(), n, vocab_size_,
                                     raw_at_token_.as<float>(), stream));
  HostCopies copies;
  RETURN_IF_ERROR(CopyResults(n, stream, &copies));
  FillResults(rows, copies, results, host_rows);
  return absl::OkStatus();
}

absl::Status DeviceSampler::CopyResults(int32_t n, cudaStream_t stream,
                                        HostCopies* out) const {
  RETURN_IF_ERROR(Download(tokens_, &out->tokens, n, stream));
  RETURN_IF_ERROR(Download(accepted_, &out->accepted, any_sampled_draft_ ? n : 0, stream));
  RETURN_IF_ERROR(Download(normalizers_, &out->norms, n, stream));
  RETURN_IF_ERROR(Download(raw_at_token_, &out->raw, n, stream));
  const size_t beam_entries = static_cast<size_t>(n) * static_cast<size_t>(beam_width_);
  RETURN_IF_ERROR(Download(beam_tokens_, &out->beam_tokens, beam_entries, stream));
  RETURN_IF_ERROR(Download(beam_scores_, &out->beam_scores, beam_entries, stream));
  RETURN_IF_ERROR(Download(beam_keys_, &out->beam_keys,
                           beam_sample_host_.empty() ? 0 : beam_entries, stream));
  const size_t top_entries = static_cast<size_t>(n) * static_cast<size_t>(top_width_);
  RETURN_IF_ERROR(Download(top_tokens_, &out->top_tokens, top_entries, stream));
  RETURN_IF_ERROR(Download(top_raw_, &out->top_raw, top_entries, stream));
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("device sampler: %s",
                                               cudaGetErrorString(cudaGetLastError())));
  }
  return absl::OkStatus();
}

void DeviceSampler::FillResults(std::span<const sampling::SamplingRow> rows,
                                const HostCopies& copies,
                                std::span<sampling::SampleResult> results,
                                std::vector<int32_t>* host_rows) const {
  for (size_t r = 0; r < rows.size(); ++r) {
    sampling::SampleResult& result = results[r];
    result.top_logprobs.clear();
    result.beam_candidates.clear();
    result.draft_accepted = false;
    const int32_t token = copies.tokens[r];
    // A beam-sampling row over a +inf: the candidate order clamps it, the
    // CPU's warpers do not.
    const bool host_beam_sample =
        rows[r].params->beam_sample && !std::isfinite(copies.norms[r].max);
    if (host_[r] || token == cuda::kNoDraw || host_beam_sample ||
        !FillTopLogprobs(r, rows[r], copies, &result)) {
      result.token = -1;
      result.top_logprobs.clear();
      host_rows->push_back(static_cast<int32_t>(r));
      continue;
    }
    result.token = token;
    result.logprob = sampling::RawLogprob(copies.raw[r], copies.norms[r].max, copies.norms[r].sum);
    if (rows[r].draft_token >= 0) {
      result.draft_accepted =
          SampledDraft(rows[r]) ? copies.accepted[r] != 0 : token == rows[r].draft_token;
    }
    if (!Beam(*rows[r].params)) continue;
    const size_t first = r * static_cast<size_t>(beam_width_);
    for (int32_t j = 0; j < rows[r].params->beam_candidates; ++j) {
      const int32_t candidate = copies.beam_tokens[first + j];
      if (candidate < 0) break;
      const float score = copies.beam_scores[first + j];
      const float key = rows[r].params->beam_sample ? copies.beam_keys[first + j] : score;
      result.beam_candidates.push_back({candidate, score, key});
    }
  }
}

absl::Status DeviceSampler::RankTopLogprobs(std::span<const sampling::SamplingRow> rows,
                                            cudaStream_t stream) {
  if (top_width_ == 0) return absl::OkStatus();
  const int32_t n = static_cast<int32_t>(rows.size());
  // k = logprobs over the raw row; top_k 0 (reported unsupported at once)
  // for the rows that ask for none.
  std::vector<cuda::TopKRowParams> top_k(n);
  for (int32_t r = 0; r < n; ++r) {
    top_k[r] = {host_[r] ? 0 : TopWidth(*rows[r].params, vocab_size_), 1.0f, 0.0f};
  }
  RETURN_IF_ERROR(KeepCandidates(raw_.as<float>(), top_k, stream));
  return cuda::GatherKeptCandidates(
      {raw_.as<float>(), kept_tokens_.as<int32_t>(), kept_results_.as<cuda::TopKRowResult>(),
       top_tokens_.as<int32_t>(), top_raw_.as<float>(), top_width_, n, vocab_size_},
      stream);
}

bool DeviceSampler::FillTopLogprobs(size_t r, const sampling::SamplingRow& row,
                                    const HostCopies& copies,
                                    sampling::SampleResult* result) const {
  const int32_t k = TopWidth(*row.params, vocab_size_);
  const size_t first = r * static_cast<size_t>(top_width_);
  const cuda::LogSoftmaxNormalizerResult& norm = copies.norms[r];
  // A +inf anywhere in the row: the candidate order ties it with FLT_MAX.
  if (k > 0 && norm.max == std::numeric_limits<float>::infinity()) return false;
  for (int32_t j = 0; j < k; ++j) {
    const int32_t token = copies.top_tokens[first + j];
    if (token < 0) return false;  // fewer live logits than k
    result->top_logprobs.push_back(
        {token, sampling::RawLogprob(copies.top_raw[first + j], norm.max, norm.sum)});
  }
  return true;
}

}  // namespace tandem::device
