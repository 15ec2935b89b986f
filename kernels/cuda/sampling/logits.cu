// One block per row. The penalties follow the CPU's two scratch passes with
// atomics instead of a serial walk: every id of the row marks `seen` (and
// output ids bump `counts`); after a barrier, the one thread whose atomic
// exchange takes an id's mark back to zero applies that id's penalty, so each
// distinct id is penalized exactly once and the scratch ends all zero.
#include "kernels/cuda/sampling/logits.cuh"

#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kLogitsThreads = 256;
constexpr float kNegInf = -INFINITY;

// The i-th id of the row's prompt followed by its output; -1 when out of
// range (skipped).
__device__ __forceinline__ int32_t RowToken(const LogitsRowParams& row, const int32_t* ids, int i,
                                            int32_t vocab_size) {
  const int32_t id =
      i < row.prompt_len ? ids[row.prompt_begin + i] : ids[row.output_begin + i - row.prompt_len];
  return id >= 0 && id < vocab_size ? id : -1;
}

__global__ void __launch_bounds__(kLogitsThreads) PenaltiesKernel(LogitsPenaltyParams p) {
  const LogitsRowParams row = p.rows[blockIdx.x];
  float* logits = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab_size;
  int32_t* seen = p.workspace + static_cast<int64_t>(blockIdx.x) * 2 * p.vocab_size;
  int32_t* counts = seen + p.vocab_size;
  const bool repetition = row.repetition_penalty != 1.0f;
  const bool additive = row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f;
  const int n = row.prompt_len + row.output_len;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int32_t id = RowToken(row, p.token_ids, i, p.vocab_size);
    if (id < 0) continue;
    if (repetition) atomicExch(&seen[id], 1);
    if (additive && i >= row.prompt_len) atomicAdd(&counts[id], 1);
  }
  __syncthreads();
  for (int i = threadIdx.x; repetition && i < n; i += blockDim.x) {
    const int32_t id = RowToken(row, p.token_ids, i, p.vocab_size);
    if (id < 0 || atomicExch(&seen[id], 0) != 1) continue;
    const float l = logits[id];
    logits[id] = l > 0.0f ? l / row.repetition_penalty : l * row.repetition_penalty;
  }
  __syncthreads();  // a logit may get both penalties: repetition first
  for (int i = row.prompt_len + threadIdx.x; additive && i < n; i += blockDim.x) {
    const int32_t id = RowToken(row, p.token_ids, i, p.vocab_size);
    if (id < 0) continue;
    const int32_t c = atomicExch(&counts[id], 0);
    if (c == 0) continue;
    // Rounded product, then sum, as the CPU computes it (no fused multiply-add).
    logits[id] -=
        __fadd_rn(__fmul_rn(row.frequency_penalty, static_cast<float>(c)), row.presence_penalty);
  }
  if (!(row.temperature > 0.0f) || row.temperature == 1.0f) return;
  __syncthreads();
  for (int i = threadIdx.x; i < p.vocab_size; i += blockDim.x) logits[i] /= row.temperature;
}

// The row's largest candidate value: NaN and -inf are skipped, +inf is
// clamped to FLT_MAX (CandidateList::Reset); -inf when nothing is left.
__device__ float RowCandidateMax(const float* logits, int32_t vocab_size, float* scratch) {
  float m = kNegInf;
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float x = logits[i];
    if (x > m) m = fminf(x, FLT_MAX);  // false for NaN
  }
  return BlockAllReduce(m, MaxOp(), scratch);
}

__global__ void __launch_bounds__(kLogitsThreads)
    MinPKernel(float* logits, const float* min_p, int32_t vocab_size) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  const float threshold = min_p[blockIdx.x];
  if (!(threshold > 0.0f)) return;  // the whole block
  float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab_size;
  const float m = RowCandidateMax(row, vocab_size, scratch);
  if (m == kNegInf) return;  // no candidates
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float x = row[i];
    if (x > kNegInf && expf(fminf(x, FLT_MAX) - m) < threshold) row[i] = kNegInf;
  }
}

__global__ void __launch_bounds__(kLogitsThreads)
    NormalizerKernel(const float* logits, int32_t vocab_size, LogSoftmaxNormalizerResult* out) {
  __shared__ float max_scratch[kMaxWarpsPerBlock];
  __shared__ double sum_scratch[kMaxWarpsPerBlock];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab_size;
  float m = kNegInf;
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    if (row[i] > m) m = row[i];  // false for NaN: it counts as -inf
  }
  m = BlockAllReduce(m, MaxOp(), max_scratch);
  double sum = 0.0;
  if (isfinite(m)) {
    for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
      if (row[i] > kNegInf) sum += expf(row[i] - m);  // NaN and -inf add e^-inf = 0
    }
  }
  sum = BlockAllReduce(sum, SumOp(), sum_scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = {m, sum};
}

__global__ void __launch_bounds__(kLogitsThreads)
    LogSoftmaxKernel(float* logits, const LogSoftmaxNormalizerResult* norms, const int32_t* rows,
                     int32_t vocab_size) {
  __shared__ int32_t nan_scratch[kMaxWarpsPerBlock];
  const int32_t r = rows[blockIdx.x];
  const LogSoftmaxNormalizerResult norm = norms[r];
  if (!isfinite(norm.max)) return;  // the whole block
  float* row = logits + static_cast<int64_t>(r) * vocab_size;
  int32_t any_nan = 0;
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) any_nan |= isnan(row[i]) ? 1 : 0;
  any_nan = BlockAllReduce(any_nan, MaxOp(), nan_scratch);
  const double log_norm = any_nan ? NAN : static_cast<double>(norm.max) + log(norm.sum);
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    row[i] = static_cast<float>(static_cast<double>(row[i]) - log_norm);
  }
}

__global__ void __launch_bounds__(kLogitsThreads)
    MaskKernel(float* logits, const int64_t* positions, int32_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) logits[positions[i]] = kNegInf;
}

__global__ void __launch_bounds__(kLogitsThreads)
    GatherKernel(const float* logits, const int32_t* tokens, int32_t num_rows, int32_t vocab_size,
                 float* out) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= num_rows) return;
  const int32_t token = tokens[r];
  out[r] = token >= 0 && token < vocab_size ? logits[r * vocab_size + token] : NAN;
}

absl::Status ValidateRows(const char* what, int32_t num_rows, int32_t vocab_size) {
  if (num_rows < 1 || vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": num_rows ", num_rows, " and vocab_size ", vocab_size, " must be >= 1"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t LogitsPenaltyWorkspaceBytes(int32_t num_rows, int32_t vocab_size) {
  return int64_t{2} * num_rows * vocab_size * static_cast<int64_t>(sizeof(int32_t));
}

absl::Status ApplyPenaltiesAndTemperature(const LogitsPenaltyParams& params, cudaStream_t stream) {
  if (absl::Status s = ValidateRows("logits penalties", params.num_rows, params.vocab_size);
      !s.ok()) {
    return s;
  }
  if (params.logits == nullptr || params.rows == nullptr || params.token_ids == nullptr ||
      params.workspace == nullptr) {
    return absl::InvalidArgumentError(
        "logits penalties: logits, rows, token_ids and workspace must not be null");
  }
  TANDEM_LAUNCH(PenaltiesKernel, params.num_rows, kLogitsThreads, 0, stream, params);
  return LaunchStatus("PenaltiesKernel");
}

absl::Status ApplyMinP(float* logits, const float* min_p, int32_t num_rows, int32_t vocab_size,
                       cudaStream_t stream) {
  if (absl::Status s = ValidateRows("min-p", num_rows, vocab_size); !s.ok()) return s;
  if (logits == nullptr || min_p == nullptr) {
    return absl::InvalidArgumentError("min-p: logits and min_p must not be null");
  }
  TANDEM_LAUNCH(MinPKernel, num_rows, kLogitsThreads, 0, stream, logits, min_p, vocab_size);
  return LaunchStatus("MinPKernel");
}

absl::Status LogSoftmaxNormalizers(const float* logits, int32_t num_rows, int32_t vocab_size,
                                   LogSoftmaxNormalizerResult* out, cudaStream_t stream) {
  if (absl::Status s = ValidateRows("log-softmax normalizer", num_rows, vocab_size); !s.ok()) {
    return s;
  }
  if (logits == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("log-softmax normalizer: logits and out must not be null");
  }
  TANDEM_LAUNCH(NormalizerKernel, num_rows, kLogitsThreads, 0, stream, logits, vocab_size, out);
  return LaunchStatus("NormalizerKernel");
}

absl::Status LogSoftmaxRows(float* logits, const LogSoftmaxNormalizerResult* norms,
                            const int32_t* rows, int32_t count, int32_t vocab_size,
                            cudaStream_t stream) {
  if (count < 0 || vocab_size < 1 || logits == nullptr || norms == nullptr || rows == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log-softmax rows: count ", count, " must be >= 0 and vocab_size ", vocab_size,
        " >= 1, logits, norms and rows not null"));
  }
  if (count == 0) return absl::OkStatus();
  TANDEM_LAUNCH(LogSoftmaxKernel, count, kLogitsThreads, 0, stream, logits, norms, rows,
                vocab_size);
  return LaunchStatus("LogSoftmaxKernel");
}

absl::Status MaskLogits(float* logits, const int64_t* positions, int32_t count,
                        cudaStream_t stream) {
  if (count < 0 || logits == nullptr || positions == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mask logits: count ", count, " must be >= 0, logits and positions not null"));
  }
  if (count == 0) return absl::OkStatus();
  const int blocks = (count + kLogitsThreads - 1) / kLogitsThreads;
  TANDEM_LAUNCH(MaskKernel, blocks, kLogitsThreads, 0, stream, logits, positions, count);
  return LaunchStatus("MaskKernel");
}

absl::Status GatherLogits(const float* logits, const int32_t* tokens, int32_t num_rows,
                          int32_t vocab_size, float* out, cudaStream_t stream) {
  if (absl::Status s = ValidateRows("gather logits", num_rows, vocab_size); !s.ok()) return s;
  if (logits == nullptr || tokens == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("gather logits: logits, tokens and out must not be null");
  }
  const int blocks = (num_rows + kLogitsThreads - 1) / kLogitsThreads;
  TANDEM_LAUNCH(GatherKernel, blocks, kLogitsThreads, 0, stream, logits, tokens, num_rows,
                vocab_size, out);
  return LaunchStatus("GatherKernel");
}

}  // namespace tandem::cuda
