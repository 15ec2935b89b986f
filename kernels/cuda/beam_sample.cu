// BeamKeysKernel: one block per row. A kept-list row: thread 0 finds the
// kept set's last member in the canonical order (score descending, token
// ascending) — the nucleus walk is sequential in double, as the CPU's — and
// every thread keys its strided slice against it. A whole-row row: the
// block-wide searches of vocab_candidates.cuh give the kept set's filter.
// GatherKernel: one block per row.
#include "kernels/cuda/beam_sample.cuh"

#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/beam_sampling.h"
#include "kernels/cuda/cuda_error.cuh"
#include "kernels/cuda/float_key.cuh"
#include "kernels/cuda/sample_draw.cuh"
#include "kernels/cuda/vocab_candidates.cuh"

namespace tandem::cuda {
namespace {

constexpr int kBeamThreads = 256;

// The kept set: finite scores canonically at or before (value, token).
struct KeptBound {
  float value;
  int32_t token;
};

__device__ __forceinline__ bool Kept(float x, int32_t i, KeptBound b) {
  return x > -INFINITY && (x > b.value || (x == b.value && i <= b.token));
}

// A kept-list row's bound: none when the list is empty (or the candidate
// kernel gave up on the row).
__device__ KeptBound RowBound(const BeamSampleKeysParams& p, const BeamSampleRowParams& row,
                              const float* scores) {
  const int32_t n = p.kept_results[row.row].num_kept;
  if (n <= 0) return {INFINITY, -1};
  const int64_t base = static_cast<int64_t>(row.row) * kTopKMaxCandidates;
  const int32_t m = kernels::BeamNucleusSize(p.kept_weights + base, n, row.top_p, row.min_p);
  const int32_t last = p.kept_tokens[base + m - 1];
  return {scores[last], last};
}

__device__ __forceinline__ float Key(const BeamSampleRowParams& row, float score, int32_t i) {
  return score + kernels::GumbelNoise(row.seed, row.stream, row.step, i);
}

__device__ void KeyKeptList(const BeamSampleKeysParams& p, const BeamSampleRowParams& row,
                            const float* scores, float* keys, KeptBound* shared_bound) {
  if (threadIdx.x == 0) *shared_bound = RowBound(p, row, scores);
  __syncthreads();
  const KeptBound b = *shared_bound;
  for (int32_t i = threadIdx.x; i < p.vocab_size; i += blockDim.x) {
    const float x = scores[i];
    keys[i] = Kept(x, i, b) ? Key(row, x, i) : -INFINITY;
  }
}

__device__ void KeyWholeRow(const BeamSampleKeysParams& p, const BeamSampleRowParams& row,
                            const float* scores, float* keys, const vocab::Scratch& s) {
  int32_t num_live = 0;
  const vocab::Row r = vocab::CandidateRow(scores, p.vocab_size, row.top_k, &num_live, s);
  vocab::Filter f = vocab::TopPMinPFilter(r, row.top_p, row.min_p, s);
  if (num_live >= kernels::kBeamMinTokensToKeep &&
      vocab::CountKept(r, f, s) < kernels::kBeamMinTokensToKeep) {
    f = vocab::FirstTwo(r, s);
  }
  for (int32_t i = threadIdx.x; i < p.vocab_size; i += blockDim.x) {
    const float x = scores[i];
    const bool kept = vocab::Live(r, x) && vocab::Kept(f, vocab::WeightBits(r, x), i);
    keys[i] = kept ? Key(row, x, i) : -INFINITY;
  }
}

__global__ void __launch_bounds__(kBeamThreads) BeamKeysKernel(BeamSampleKeysParams p) {
  __shared__ KeptBound bound;
  __shared__ double sums[kMaxWarpsPerBlock];
  __shared__ int32_t counts[kMaxWarpsPerBlock];
  __shared__ uint32_t bits[kMaxWarpsPerBlock];
  const BeamSampleRowParams row = p.rows[blockIdx.x];
  const float* scores = p.scores + static_cast<int64_t>(row.row) * p.vocab_size;
  float* keys = p.keys + static_cast<int64_t>(blockIdx.x) * p.vocab_size;
  if (row.kept_list) {  // the whole block
    KeyKeptList(p, row, scores, keys, &bound);
  } else {
    KeyWholeRow(p, row, scores, keys, {sums, counts, bits});
  }
}

__global__ void __launch_bounds__(kBeamThreads) GatherKernel(BeamSampleGatherParams p) {
  const int32_t j = blockIdx.x;
  const int32_t r = p.rows[j].row;
  const int32_t num_kept = p.key_results[j].num_kept;
  const int32_t kept = num_kept < 0 ? 0 : (num_kept < p.per_row ? num_kept : p.per_row);
  const int32_t* best = p.key_tokens + static_cast<int64_t>(j) * kTopKMaxCandidates;
  const float* scores = p.scores + static_cast<int64_t>(r) * p.vocab_size;
  const float* keys = p.keys + static_cast<int64_t>(j) * p.vocab_size;
  for (int32_t i = threadIdx.x; i < p.per_row; i += blockDim.x) {
    const int64_t out = static_cast<int64_t>(r) * p.per_row + i;
    const int32_t token = i < kept ? best[i] : -1;
    p.out_tokens[out] = token;
    p.out_scores[out] = token >= 0 ? scores[token] : NAN;
    p.out_keys[out] = token >= 0 ? keys[token] : NAN;
  }
  if (threadIdx.x == 0) p.tokens[r] = kept > 0 ? best[0] : kNoDraw;
}

}  // namespace

absl::Status BeamSampleKeys(const BeamSampleKeysParams& p, cudaStream_t stream) {
  if (p.num_rows < 1 || p.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("beam sample keys: num_rows ", p.num_rows,
                                                   " and vocab_size ", p.vocab_size,
                                                   " must be >= 1"));
  }
  if (p.scores == nullptr || p.rows == nullptr || p.kept_tokens == nullptr ||
      p.kept_weights == nullptr || p.kept_results == nullptr || p.keys == nullptr) {
    return absl::InvalidArgumentError(
        "beam sample keys: scores, rows, the kept lists and keys must not be null");
  }
  TANDEM_LAUNCH(BeamKeysKernel, p.num_rows, kBeamThreads, 0, stream, p);
  return LaunchStatus("BeamKeysKernel");
}

absl::Status GatherBeamSamples(const BeamSampleGatherParams& p, cudaStream_t stream) {
  if (p.num_rows < 1 || p.vocab_size < 1 || p.per_row < 1 || p.per_row > kTopKMaxCandidates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "beam sample gather: num_rows ", p.num_rows, " and vocab_size ", p.vocab_size,
        " must be >= 1, per_row ", p.per_row, " in [1, ", kTopKMaxCandidates, "]"));
  }
  if (p.scores == nullptr || p.keys == nullptr || p.rows == nullptr || p.key_tokens == nullptr ||
      p.key_results == nullptr || p.out_tokens == nullptr || p.out_scores == nullptr ||
      p.out_keys == nullptr || p.tokens == nullptr) {
    return absl::InvalidArgumentError(
        "beam sample gather: scores, keys, rows, the key lists and the outputs must not be null");
  }
  TANDEM_LAUNCH(GatherKernel, p.num_rows, kBeamThreads, 0, stream, p);
  return LaunchStatus("BeamSampleGatherKernel");
}

}  // namespace tandem::cuda
