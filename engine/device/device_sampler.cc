#include "engine/device/device_sampler.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/sampling/logits_processor.h"
#include "kernels/cuda/logits.cuh"
#include "kernels/cuda/sample_draw.cuh"
#include "kernels/cuda/top_k.cuh"
#include "kernels/cuda/vocab_draw.cuh"

namespace tandem::device {
namespace {

// Min-tokens mask ids (stop ids + EOS ids) a row may have on the device; a
// row with more is left to the host.
constexpr int32_t kMaxMaskIdsPerRow = 64;

bool HostOnly(const sampling::SamplingRow& row) {
  const sampling::SamplingParams& p = *row.params;
  const int64_t mask_ids = static_cast<int64_t>(p.stop_token_ids.size()) +
                           static_cast<int64_t>(row.eos_token_ids.size());
  return p.beam_candidates > 0 || p.logprobs > 0 || mask_ids > kMaxMaskIdsPerRow;
}

bool Greedy(const sampling::SamplingParams& p) {
  return p.temperature < sampling::kGreedyTemperature;
}

// Candidate-kernel rows: greedy (k = 1) and top-k within its capacity.
bool UsesTopKKernel(const sampling::SamplingParams& p) {
  return Greedy(p) || (p.top_k >= 1 && p.top_k <= cuda::kTopKMaxCandidates);
}

template <typename T>
absl::Status UploadAll(cuda::DeviceBuffer& buffer, const std::vector<T>& host,
                       cudaStream_t stream) {
  if (host.empty()) return absl::OkStatus();
  return buffer.Upload(host.data(), static_cast<int64_t>(host.size() * sizeof(T)), 0, stream);
}

template <typename T>
absl::Status Download(const cuda::DeviceBuffer& buffer, std::vector<T>* host, size_t n,
                      cudaStream_t stream) {
  host->resize(n);
  if (cudaMemcpyAsync(host->data(), buffer.data(), n * sizeof(T), cudaMemcpyDeviceToHost,
                      stream) != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("device sampler: copy to host: %s",
                                               cudaGetErrorString(cudaGetLastError())));
  }
  return absl::OkStatus();
}

}  // namespace

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
  std::vector<cuda::LogitsRowParams> params;
  for (int32_t r = 0; r < n; ++r) {
    const sampling::SamplingRow& row = rows[r];
    const sampling::SamplingParams& p = *row.params;
    const int64_t base = int64_t{r} * vocab_size_;
    if (!HostOnly(row) && static_cast<int64_t>(row.output_tokens.size()) < p.min_tokens) {
      for (int32_t id : p.stop_token_ids) mask.push_back(base + id);
      if (!p.ignore_eos) {
        for (int32_t id : row.eos_token_ids) mask.push_back(base + id);
      }
    }
    cuda::LogitsRowParams lp;
    lp.repetition_penalty = p.repetition_penalty;
    lp.frequency_penalty = p.frequency_penalty;
    lp.presence_penalty = p.presence_penalty;
    lp.temperature = Greedy(p) ? 1.0f : p.temperature;
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
  RETURN_IF_ERROR(UploadAll(mask_, mask, stream));
  RETURN_IF_ERROR(cuda::MaskLogits(processed_.as<float>(), mask_.as<int64_t>(),
                                   static_cast<int32_t>(mask.size()), stream));
  RETURN_IF_ERROR(UploadAll(token_ids_, ids, stream));
  RETURN_IF_ERROR(UploadAll(logit_rows_, params, stream));
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
  std::vector<cuda::VocabDrawRowParams> vocab(n);
  bool any_vocab = false;
  for (int32_t r = 0; r < n; ++r) {
    const sampling::SamplingParams& p = *rows[r].params;
    draw[r] = {.seed = rows[r].seed,
               .stream = rows[r].stream,
               .step = rows[r].output_tokens.size(),
               .argmax = Greedy(p)};
    vocab[r].skip = UsesTopKKernel(p);
    if (vocab[r].skip) {
      // k 1 for a greedy row: the largest logits, ties kept, lowest id first.
      top_k[r] = Greedy(p) ? cuda::TopKRowParams{1, 1.0f, 0.0f}
                           : cuda::TopKRowParams{p.top_k, p.top_p, p.min_p};
    } else {
      top_k[r].top_k = 0;  // not this kernel's row: reported unsupported at once
      vocab[r] = {p.top_k, p.top_p, p.min_p, draw[r], /*skip=*/false};
      any_vocab = true;
    }
  }
  RETURN_IF_ERROR(UploadAll(top_k_rows_, top_k, stream));
  RETURN_IF_ERROR(UploadAll(draw_rows_, draw, stream));
  RETURN_IF_ERROR(cuda::TopKTopP(
      {processed_.as<float>(), top_k_rows_.as<cuda::TopKRowParams>(), kept_tokens_.as<int32_t>(),
       kept_weights_.as<float>(), kept_results_.as<cuda::TopKRowResult>(), n, vocab_size_},
      stream));
  RETURN_IF_ERROR(cuda::DrawTokens(
      {kept_tokens_.as<int32_t>(), kept_weights_.as<float>(),
       kept_results_.as<cuda::TopKRowResult>(), draw_rows_.as<cuda::DrawRowParams>(),
       tokens_.as<int32_t>(), n},
      stream));
  if (!any_vocab) return absl::OkStatus();
  RETURN_IF_ERROR(UploadAll(vocab_rows_, vocab, stream));
  return cuda::VocabDraw({processed_.as<float>(), vocab_rows_.as<cuda::VocabDrawRowParams>(),
                          tokens_.as<int32_t>(), n, vocab_size_},
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
  RETURN_IF_ERROR(GatherRows(logits, logit_rows, stream));
  RETURN_IF_ERROR(Process(rows, stream));
  RETURN_IF_ERROR(Draw(rows, stream));
  RETURN_IF_ERROR(cuda::LogSoftmaxNormalizers(
      raw_.as<float>(), n, vocab_size_, normalizers_.as<cuda::LogSoftmaxNormalizerResult>(),
      stream));
  RETURN_IF_ERROR(cuda::GatherLogits(raw_.as<float>(), tokens_.as<int32_t>(), n, vocab_size_,
                                     raw_at_token_.as<float>(), stream));
  std::vector<int32_t> tokens;
  std::vector<cuda::LogSoftmaxNormalizerResult> norms;
  std::vector<float> raw;
  RETURN_IF_ERROR(Download(tokens_, &tokens, n, stream));
  RETURN_IF_ERROR(Download(normalizers_, &norms, n, stream));
  RETURN_IF_ERROR(Download(raw_at_token_, &raw, n, stream));
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    return absl::InternalError(absl::StrFormat("device sampler: %s",
                                               cudaGetErrorString(cudaGetLastError())));
  }
  for (int32_t r = 0; r < n; ++r) {
    sampling::SampleResult& result = results[r];
    result.top_logprobs.clear();
    result.beam_candidates.clear();
    if (HostOnly(rows[r]) || tokens[r] == cuda::kNoDraw) {
      result.token = -1;
      host_rows->push_back(r);
      continue;
    }
    result.token = tokens[r];
    result.logprob = sampling::RawLogprob(raw[r], norms[r].max, norms[r].sum);
  }
  return absl::OkStatus();
}

}  // namespace tandem::device
