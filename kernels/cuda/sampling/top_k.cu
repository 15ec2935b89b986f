// TopKKernel: one block of kTopKThreads per row, candidates in static shared
// memory (value[], token[] of kTopKMaxCandidates).
//
//   1. each thread: the maximum of its strided slice (its group) and its
//      count of live logits (not NaN, not -inf)
//   2. the group maxima sorted (bitonic); the k-th is the bound
//   3. logits >= bound appended to the candidates (shared atomic counter);
//      too many: the exact k-th value by bisection, and append again
//   4. the candidates sorted into the canonical order; the top-k set is the
//      first k plus the ties of the k-th
//   5. weights, then top-p and min-p walk the sorted head (one thread, in
//      double, as the CPU list does), and the kept head is written out
#include "kernels/cuda/sampling/top_k.cuh"

#include <cfloat>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/primitives/float_key.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kTopKThreads = 1024;  // groups; also half of kTopKMaxCandidates (bitonic pairs)
constexpr float kNegInf = -INFINITY;
constexpr float kPosInf = INFINITY;

// The canonical order of engine/sampling/candidate_list.h.
__device__ __forceinline__ bool Before(float va, int32_t ta, float vb, int32_t tb) {
  return va > vb || (va == vb && ta < tb);
}

// Sorts value[0, n) / token[0, n) into the canonical order; n a power of two
// <= 2 * blockDim.x. Starts and ends with a barrier.
__device__ void BitonicSort(float* value, int32_t* token, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const int lo = 2 * i - (i & (stride - 1));
        const int hi = lo + stride;
        const bool canonical_run = (lo & size) == 0;  // this run ascends in canonical order
        if (canonical_run == Before(value[hi], token[hi], value[lo], token[lo])) {
          const float v = value[lo];
          value[lo] = value[hi];
          value[hi] = v;
          const int32_t t = token[lo];
          token[lo] = token[hi];
          token[hi] = t;
        }
      }
    }
  }
  __syncthreads();
}

// Sorts the first n candidates, padding up to a power of two with entries
// that sort last (-inf, INT_MAX), which overwrite whatever lies there.
__device__ void SortCandidates(float* value, int32_t* token, int n) {
  int padded = 1;
  while (padded < n) padded <<= 1;
  for (int i = n + threadIdx.x; i < padded; i += blockDim.x) {
    value[i] = kNegInf;
    token[i] = INT_MAX;
  }
  BitonicSort(value, token, padded);
}

// The k-th largest of the block's group maxima (a lower bound of the row's
// k-th largest logit), or -inf when k exceeds the number of groups.
__device__ float GroupMaximaBound(float group_max, int k, float* value, int32_t* token) {
  if (k > static_cast<int>(blockDim.x)) return kNegInf;
  value[threadIdx.x] = group_max;
  token[threadIdx.x] = threadIdx.x;
  BitonicSort(value, token, blockDim.x);
  return value[k - 1];
}

// Appends every live logit >= bound (up to kTopKMaxCandidates of them) and
// returns how many there are in all.
__device__ int Collect(const float* logits, int vocab_size, float bound, float* value,
                       int32_t* token, int32_t* counter) {
  if (threadIdx.x == 0) *counter = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float x = logits[i];
    if (!(x > kNegInf) || x < bound) continue;
    const int slot = atomicAdd(counter, 1);
    if (slot < kTopKMaxCandidates) {
      value[slot] = x;
      token[slot] = i;
    }
  }
  __syncthreads();
  const int total = *counter;
  __syncthreads();  // read before anyone resets it
  return total;
}

// Size of the top-k set at the head of the sorted candidates: all `total`
// when the row has at most k live logits, else k plus the ties of the k-th.
__device__ int TopKSetSize(const float* value, int total, int num_live, int k) {
  if (num_live <= k) return total;
  int n = k;
  while (n < total && value[n] == value[k - 1]) ++n;
  return n;
}

// +inf candidates become the largest float (CandidateList::Reset); they lead
// the sorted head, and the head is re-sorted since they may now tie with it.
__device__ void ClampInfinities(float* value, int32_t* token, int n) {
  if (value[0] != kPosInf) return;  // the whole block
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) value[i] = fminf(value[i], FLT_MAX);
  SortCandidates(value, token, n);
}

// Keeps the top-p head, then the min-p head, of the n sorted weights;
// returns the count and leaves the kept weights' sum in *kept_sum.
__device__ int TopPMinP(const TopKRowParams& row, const float* weight, int n, double* kept_sum) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) total += weight[i];
  int keep = n;
  if (row.top_p < 1.0f) {
    const double target = static_cast<double>(row.top_p) * total;
    double mass = 0.0;
    for (int i = 0; i < n; ++i) {
      mass += weight[i];
      if (mass >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  if (row.min_p > 0.0f) {
    const float threshold = row.min_p * weight[0];
    int m = 0;
    while (m < keep && weight[m] >= threshold) ++m;
    keep = m;
  }
  double sum = 0.0;
  for (int i = 0; i < keep; ++i) sum += weight[i];
  *kept_sum = sum;
  return keep;
}

// Steps 5: weights in place, the cut by thread 0, the kept head written.
__device__ void FinishRow(const TopKParams& p, const TopKRowParams& row, float* value,
                          int32_t* token, int num_top_k, int32_t* kept_shared) {
  const float max_value = value[0];
  __syncthreads();
  for (int i = threadIdx.x; i < num_top_k; i += blockDim.x) value[i] = expf(value[i] - max_value);
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0.0;
    *kept_shared = TopPMinP(row, value, num_top_k, &sum);
    p.results[blockIdx.x] = {num_top_k, *kept_shared, sum};
  }
  __syncthreads();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kTopKMaxCandidates;
  for (int i = threadIdx.x; i < *kept_shared; i += blockDim.x) {
    p.tokens[base + i] = token[i];
    p.weights[base + i] = value[i];
  }
}

__global__ void __launch_bounds__(kTopKThreads) TopKKernel(TopKParams p) {
  __shared__ float value[kTopKMaxCandidates];
  __shared__ int32_t token[kTopKMaxCandidates];
  __shared__ int32_t scratch[kMaxWarpsPerBlock];
  __shared__ int32_t counter;
  const TopKRowParams row = p.rows[blockIdx.x];
  const int k = row.top_k;
  if (k < 1 || k > kTopKMaxCandidates) {  // the whole block
    if (threadIdx.x == 0) p.results[blockIdx.x] = {0, kTopKUnsupported, 0.0};
    return;
  }
  const float* logits = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab_size;
  float group_max = kNegInf;
  int live = 0;
  for (int i = threadIdx.x; i < p.vocab_size; i += blockDim.x) {
    const float x = logits[i];
    live += x > kNegInf;
    if (x > group_max) group_max = x;  // false for NaN
  }
  const int num_live = BlockAllReduce(live, SumOp(), scratch);
  const float bound = num_live > k ? GroupMaximaBound(group_max, k, value, token) : kNegInf;
  int total = Collect(logits, p.vocab_size, bound, value, token, &counter);
  if (total > kTopKMaxCandidates) {
    const float kth = BlockKthLargest(logits, p.vocab_size, k, scratch);
    total = Collect(logits, p.vocab_size, kth, value, token, &counter);
  }
  if (total == 0 || total > kTopKMaxCandidates) {  // no live logit, or too many ties
    if (threadIdx.x == 0) {
      p.results[blockIdx.x] = {total, total == 0 ? 0 : kTopKOverflow, 0.0};
    }
    return;
  }
  SortCandidates(value, token, total);
  const int num_top_k = TopKSetSize(value, total, num_live, k);
  ClampInfinities(value, token, num_top_k);
  FinishRow(p, row, value, token, num_top_k, &counter);
}

__global__ void __launch_bounds__(kTopKThreads) KeptCandidatesKernel(KeptCandidatesParams p) {
  const int32_t r = blockIdx.x;
  const int32_t num_kept = p.results[r].num_kept;
  const int32_t kept = num_kept < 0 ? 0 : (num_kept < p.per_row ? num_kept : p.per_row);
  const int32_t* tokens = p.tokens + static_cast<int64_t>(r) * kTopKMaxCandidates;
  const float* row = p.logits + static_cast<int64_t>(r) * p.vocab_size;
  for (int j = threadIdx.x; j < p.per_row; j += blockDim.x) {
    const int64_t out = static_cast<int64_t>(r) * p.per_row + j;
    p.out_tokens[out] = j < kept ? tokens[j] : -1;
    p.out_logits[out] = j < kept ? row[tokens[j]] : NAN;
  }
}

}  // namespace

absl::Status GatherKeptCandidates(const KeptCandidatesParams& p, cudaStream_t stream) {
  if (p.num_rows < 1 || p.vocab_size < 1 || p.per_row < 1 || p.per_row > kTopKMaxCandidates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kept candidates: num_rows ", p.num_rows, " and vocab_size ", p.vocab_size,
        " must be >= 1, per_row ", p.per_row, " in [1, ", kTopKMaxCandidates, "]"));
  }
  if (p.logits == nullptr || p.tokens == nullptr || p.results == nullptr ||
      p.out_tokens == nullptr || p.out_logits == nullptr) {
    return absl::InvalidArgumentError(
        "kept candidates: logits, tokens, results and the outputs must not be null");
  }
  TANDEM_LAUNCH(KeptCandidatesKernel, p.num_rows, kTopKThreads, 0, stream, p);
  return LaunchStatus("KeptCandidatesKernel");
}

absl::Status TopKTopP(const TopKParams& params, cudaStream_t stream) {
  if (params.num_rows < 1 || params.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("top-k: num_rows ", params.num_rows,
                                                   " and vocab_size ", params.vocab_size,
                                                   " must be >= 1"));
  }
  if (params.logits == nullptr || params.rows == nullptr || params.tokens == nullptr ||
      params.weights == nullptr || params.results == nullptr) {
    return absl::InvalidArgumentError(
        "top-k: logits, rows, tokens, weights and results must not be null");
  }
  TANDEM_LAUNCH(TopKKernel, params.num_rows, kTopKThreads, 0, stream, params);
  return LaunchStatus("TopKKernel");
}

}  // namespace tandem::cuda
