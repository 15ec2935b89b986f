// CudaModelRunner's sampling on the device: ForwardSample runs the forward,
// then per chunk of logits rows hands the requested rows to the
// DeviceSampler and copies to the host only the rows it leaves there.
#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/device/cuda_model_runner.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::device {

absl::Status CudaModelRunner::ForwardSample(std::span<const model::ForwardSequence> batch,
                                            std::span<const int64_t> logit_rows,
                                            std::span<const sampling::SamplingRow> rows,
                                            std::span<sampling::SampleResult> results,
                                            float* logits, std::vector<int32_t>* host_rows) {
  if (!sampler_.has_value()) {
    return absl::UnimplementedError(
        "sampling on the device: this runner samples on the host (--cuda-sampling host, or a "
        "tensor-parallel rank other than 0)");
  }
  const int64_t num_rows = model::Model::NumLogitRows(batch);
  if (logit_rows.size() != rows.size() || results.size() != rows.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ForwardSample: %d logits rows, %d sampling rows and %d results differ",
                        logit_rows.size(), rows.size(), results.size()));
  }
  for (int64_t r : logit_rows) {
    if (r < 0 || r >= num_rows) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ForwardSample: logits row %d is outside the batch's %d rows", r, num_rows));
    }
  }
  RETURN_IF_ERROR(Body(batch));
  if (!rows.empty()) {
    RETURN_IF_ERROR(HeadSample(batch, logit_rows, rows, results, logits, host_rows));
  }
  return cuda::CudaStatus(cudaStreamSynchronize(stream_), "forward");
}

absl::Status CudaModelRunner::HeadSample(std::span<const model::ForwardSequence> batch,
                                         std::span<const int64_t> logit_rows,
                                         std::span<const sampling::SamplingRow> rows,
                                         std::span<sampling::SampleResult> results,
                                         float* logits, std::vector<int32_t>* host_rows) {
  const int64_t vocab = model_->config().vocab_size;
  ASSIGN_OR_RETURN(const int64_t num_rows, GatherLogitRows(batch));
  // Requests by logits row, so that each chunk's are one contiguous run.
  std::vector<int32_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logit_rows[a] < logit_rows[b]; });
  size_t next = 0;
  std::vector<int64_t> local;
  std::vector<sampling::SamplingRow> chunk_rows;
  std::vector<sampling::SampleResult> chunk_results;
  std::vector<int32_t> chunk_host;
  for (int64_t r = 0; r < num_rows && next < order.size(); r += logits_rows_) {
    const int64_t m = std::min<int64_t>(logits_rows_, num_rows - r);
    size_t end = next;
    while (end < order.size() && logit_rows[order[end]] < r + m) ++end;
    if (end == next) continue;
    RETURN_IF_ERROR(ChunkLogits(r, m));
    local.clear();
    chunk_rows.clear();
    for (size_t k = next; k < end; ++k) {
      local.push_back(logit_rows[order[k]] - r);
      chunk_rows.push_back(rows[order[k]]);
    }
    chunk_results.assign(end - next, {});
    chunk_host.clear();
    RETURN_IF_ERROR(sampler_->Sample(logits_.as<float>(), local, chunk_rows, chunk_results,
                                     &chunk_host, stream_));
    for (size_t k = next; k < end; ++k) results[order[k]] = std::move(chunk_results[k - next]);
    for (int32_t h : chunk_host) {
      const int32_t i = order[next + h];
      host_rows->push_back(i);
      RETURN_IF_ERROR(cuda::CudaStatus(
          cudaMemcpyAsync(logits + logit_rows[i] * vocab, logits_.as<float>() + local[h] * vocab,
                          vocab * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "copying a host row's logits"));
    }
    // logits_ is reused by the next chunk.
    RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamSynchronize(stream_), "logits"));
    next = end;
  }
  std::sort(host_rows->begin(), host_rows->end());
  return absl::OkStatus();
}

}  // namespace tandem::device
