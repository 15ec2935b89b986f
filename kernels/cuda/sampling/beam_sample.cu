// BeamKeysKernel: one block per row. A kept-list row: thread 0 finds the
// kept set's last member in the canonical order (score descending, token
// ascending) — the nucleus walk is sequential in double, as the CPU's — and
// every thread keys its strided slice against it. A whole-row row: the
// block-wide searches of vocab_candidates.cuh give the kept set's filter.
// GatherKernel: one block per row.
#include "kernels/cuda/sampling/beam_sample.cuh"

#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/beam_sampling.h"
#include "kernels/cuda/primitives/float_key.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/cuda/sampling/sample_draw.cuh"
#include "kernels/cuda/sampling/vocab_candidates.cuh"

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

// The lowest token above `after` whose live score equals `value` (INT_MAX:
// none). Block-wide.
__device__ int32_t LowestTokenAt(const vocab::Row& r, float value, int32_t after,
                                 const vocab::Scratch& s) {
  int32_t token = INT_MAX;
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float x = r.logits[i];
    if (i > after && vocab::Live(r, x) && x == value && i < token) token = i;
  }
  return BlockAllReduce(token, MinOp(), s.counts);
}

// The bound keeping the row's first two live candidates in the CPU's order
// (score descending, token ascending) — not the weights' order, in which
// distinct scores whose weights round alike (or underflow to 0) tie.
// Block-wide; the row has at least two live candidates.
__device__ KeptBound FirstTwoByScore(const vocab::Row& r, const vocab::Scratch& s) {
  const float best = r.max_logit;
  const int32_t first = LowestTokenAt(r, best, -1, s);
  const int32_t tied = LowestTokenAt(r, best, first, s);
  if (tied != INT_MAX) return {best, tied};
  uint32_t next = 0;  // OrderedKey of the largest live score below the best
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float x = r.logits[i];
    if (vocab::Live(r, x) && x < best && OrderedKey(x) > next) next = OrderedKey(x);
  }
  const float second = KeyToFloat(BlockAllReduce(next, MaxOp(), s.bits));
  return {second, LowestTokenAt(r, second, -1, s)};
}

__device__ void KeyWholeRow(const BeamSampleKeysParams& p, const BeamSampleRowParams& row,
                            const float* scores, float* keys, const vocab::Scratch& s) {
  int32_t num_live = 0;
  const vocab::Row r = vocab::CandidateRow(scores, p.vocab_size, row.top_k, &num_live, s);
  const vocab::Filter f = vocab::TopPMinPFilter(r, row.top_p, row.min_p, s);
  // The warpers keep at least two: then exactly the first two.
  const bool first_two = num_live >= kernels::kBeamMinTokensToKeep &&
                         vocab::CountKept(r, f, s) < kernels::kBeamMinTokensToKeep;
  const KeptBound two = first_two ? FirstTwoByScore(r, s) : KeptBound{-INFINITY, INT_MAX};
  for (int32_t i = threadIdx.x; i < p.vocab_size; i += blockDim.x) {
    const float x = scores[i];
    const bool kept = vocab::Live(r, x) && (first_two ? Kept(x, i, two)
                                                      : vocab::Kept(f, vocab::WeightBits(r, x), i));
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
