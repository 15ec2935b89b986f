// VocabDrawKernel: one block per row, kVocabDrawThreads threads (fewer,
// in whole warps, for a vocabulary smaller than that). Every helper is
// block-wide (all threads call it and get the same answer: the reductions of
// block_reduce.cuh hand every thread the same bits), so the control flow
// stays uniform across the block.
#include "kernels/cuda/vocab_draw.cuh"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/counter_rng.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_error.cuh"
#include "kernels/cuda/float_key.cuh"

namespace tandem::cuda {
namespace {

constexpr int kVocabDrawThreads = 256;
constexpr float kNegInf = -INFINITY;
constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the largest weight

struct Scratch {
  double* sums;
  int32_t* counts;
  uint32_t* bits;
};

// A row's candidates: live logits, >= kth under top-k (kth = -inf when off).
struct Row {
  const float* logits;
  int32_t vocab_size;
  float max_logit;  // the largest live logit, +inf clamped
  float kth;
};

__device__ __forceinline__ bool Live(const Row& r, float l) { return l > kNegInf && l >= r.kth; }

__device__ __forceinline__ uint32_t WeightBits(const Row& r, float l) {
  return __float_as_uint(expf(fminf(l, FLT_MAX) - r.max_logit));
}

// Which candidates are kept: those at or before `cut` in the canonical order
// (weight bits descending, token ascending) with weight bits >= min_bits.
struct Filter {
  uint32_t cut_bits = 0;
  int32_t cut_token = INT_MAX;
  uint32_t min_bits = 0;
};

__device__ __forceinline__ bool Kept(const Filter& f, uint32_t wb, int32_t token) {
  return wb >= f.min_bits && (wb > f.cut_bits || (wb == f.cut_bits && token <= f.cut_token));
}

// Σ weights of the kept candidates with weight bits >= bits.
__device__ double MassAtLeast(const Row& r, const Filter& f, uint32_t bits, const Scratch& s) {
  double mass = 0.0;
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float l = r.logits[i];
    if (!Live(r, l)) continue;
    const uint32_t wb = WeightBits(r, l);
    if (wb >= bits && Kept(f, wb, i)) mass += __uint_as_float(wb);
  }
  return BlockAllReduce(mass, SumOp(), s.sums);
}

// Kept candidates of weight bits exactly `bits` with token <= last_token.
__device__ int32_t CountTies(const Row& r, const Filter& f, uint32_t bits, int32_t last_token,
                             const Scratch& s) {
  int32_t count = 0;
  for (int32_t i = threadIdx.x; i <= last_token && i < r.vocab_size; i += blockDim.x) {
    const float l = r.logits[i];
    if (!Live(r, l)) continue;
    const uint32_t wb = WeightBits(r, l);
    count += wb == bits && Kept(f, wb, i);
  }
  return BlockAllReduce(count, SumOp(), s.counts);
}

// The token of the j-th (1-based) kept tie of weight bits `bits`, in token order.
__device__ int32_t NthTie(const Row& r, const Filter& f, uint32_t bits, int32_t j,
                          const Scratch& s) {
  int32_t lo = 0, hi = r.vocab_size - 1;  // the answer lies in [lo, hi]
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (CountTies(r, f, bits, mid, s) >= j) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The first kept candidate in the canonical order at which the running mass
// crosses `target` (>= when `reaches`, else >); false when the whole kept
// mass does not.
__device__ bool FindCrossing(const Row& r, const Filter& f, double target, bool reaches,
                             const Scratch& s, uint32_t* at_bits, int32_t* at_token) {
  const auto crossed = [&](double mass) { return reaches ? mass >= target : mass > target; };
  if (!crossed(MassAtLeast(r, f, 0, s))) return false;
  // The crossing candidate's weight: the largest weight whose candidates and
  // the heavier ones together cross.
  uint32_t bits = 0;
  for (int bit = 29; bit >= 0; --bit) {
    const uint32_t trial = bits | (1u << bit);
    if (trial <= kOneBits && crossed(MassAtLeast(r, f, trial, s))) bits = trial;
  }
  // Among its ties, in token order: add them one by one, as the CPU walk does.
  const double heavier = bits < kOneBits ? MassAtLeast(r, f, bits + 1, s) : 0.0;
  const int32_t ties = CountTies(r, f, bits, r.vocab_size - 1, s);
  const double weight = __uint_as_float(bits);
  double mass = heavier;
  int32_t j = 1;
  for (; j < ties; ++j) {
    mass += weight;
    if (crossed(mass)) break;
  }
  *at_bits = bits;
  *at_token = NthTie(r, f, bits, j, s);
  return true;
}

// The lightest positive and the heaviest weight bits among the kept
// candidates (UINT_MAX / 0 when there are none).
__device__ void KeptWeightRange(const Row& r, const Filter& f, const Scratch& s,
                                uint32_t* lightest, uint32_t* heaviest) {
  uint32_t light = UINT_MAX, heavy = 0;
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float l = r.logits[i];
    if (!Live(r, l)) continue;
    const uint32_t wb = WeightBits(r, l);
    if (!Kept(f, wb, i)) continue;
    if (wb > 0) light = wb < light ? wb : light;
    heavy = wb > heavy ? wb : heavy;
  }
  *lightest = BlockAllReduce(light, MinOp(), s.bits);
  *heaviest = BlockAllReduce(heavy, MaxOp(), s.bits);
}

// The highest (`highest`) or lowest token among the kept candidates of
// weight bits `bits`.
__device__ int32_t TieEnd(const Row& r, const Filter& f, uint32_t bits, bool highest,
                          const Scratch& s) {
  int32_t token = highest ? -1 : INT_MAX;
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float l = r.logits[i];
    if (!Live(r, l) || WeightBits(r, l) != bits || !Kept(f, bits, i)) continue;
    token = highest ? (i > token ? i : token) : (i < token ? i : token);
  }
  return highest ? BlockAllReduce(token, MaxOp(), s.counts)
                 : BlockAllReduce(token, MinOp(), s.counts);
}

// When the draw's walk falls short: the canonically last kept candidate of
// positive weight (the lightest, then the highest token); with none, the
// first (the heaviest, then the lowest token).
__device__ int32_t LastPositive(const Row& r, const Filter& f, const Scratch& s) {
  uint32_t lightest = 0, heaviest = 0;
  KeptWeightRange(r, f, s, &lightest, &heaviest);
  if (lightest != UINT_MAX) return TieEnd(r, f, lightest, /*highest=*/true, s);
  return TieEnd(r, f, heaviest, /*highest=*/false, s);
}

// The row's largest live logit (+inf clamped) and its number of live logits.
__device__ float MaxLive(const float* logits, int32_t vocab_size, int32_t* num_live,
                         const Scratch& s) {
  float max_logit = kNegInf;
  int32_t live = 0;
  for (int32_t i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float l = logits[i];
    if (!(l > kNegInf)) continue;
    ++live;
    max_logit = fmaxf(max_logit, fminf(l, FLT_MAX));
  }
  *num_live = BlockAllReduce(live, SumOp(), s.counts);
  return KeyToFloat(BlockAllReduce(OrderedKey(max_logit), MaxOp(), s.bits));
}

__global__ void __launch_bounds__(kVocabDrawThreads) VocabDrawKernel(VocabDrawParams p) {
  __shared__ double sums[kMaxWarpsPerBlock];
  __shared__ int32_t counts[kMaxWarpsPerBlock];
  __shared__ uint32_t bits[kMaxWarpsPerBlock];
  const Scratch s{sums, counts, bits};
  const VocabDrawRowParams params = p.rows[blockIdx.x];
  if (params.skip) return;  // the whole block
  const float* logits = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab_size;
  int32_t num_live = 0;
  const float max_logit = MaxLive(logits, p.vocab_size, &num_live, s);
  if (num_live == 0) {
    if (threadIdx.x == 0) p.out_tokens[blockIdx.x] = kNoDraw;
    return;
  }
  const bool top_k = params.top_k > 0 && params.top_k < p.vocab_size && num_live > params.top_k;
  const Row r{logits, p.vocab_size, max_logit,
              top_k ? BlockKthLargest(logits, p.vocab_size, params.top_k, s.counts) : kNegInf};
  Filter f;
  if (params.top_p < 1.0f) {
    const double target = static_cast<double>(params.top_p) * MassAtLeast(r, f, 0, s);
    uint32_t cut_bits = 0;
    int32_t cut_token = 0;
    if (FindCrossing(r, f, target, /*reaches=*/true, s, &cut_bits, &cut_token)) {
      f.cut_bits = cut_bits;
      f.cut_token = cut_token;
    }
  }
  if (params.min_p > 0.0f) f.min_bits = __float_as_uint(params.min_p);
  const double u = kernels::UniformDraw(params.draw.seed, params.draw.stream, params.draw.step);
  const double target = u * MassAtLeast(r, f, 0, s);
  uint32_t at_bits = 0;
  int32_t token = 0;
  if (!FindCrossing(r, f, target, /*reaches=*/false, s, &at_bits, &token)) {
    token = LastPositive(r, f, s);
  }
  if (threadIdx.x == 0) p.out_tokens[blockIdx.x] = token;
}

}  // namespace

absl::Status VocabDraw(const VocabDrawParams& params, cudaStream_t stream) {
  if (params.num_rows < 1 || params.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab draw: num_rows ", params.num_rows,
                                                   " and vocab_size ", params.vocab_size,
                                                   " must be >= 1"));
  }
  if (params.logits == nullptr || params.rows == nullptr || params.out_tokens == nullptr) {
    return absl::InvalidArgumentError(
        "vocab draw: logits, rows and out_tokens must not be null");
  }
  // A small vocabulary gets a smaller block (whole warps: the reductions need them).
  const int threads = std::min(kVocabDrawThreads, (params.vocab_size + 31) / 32 * 32);
  TANDEM_LAUNCH(VocabDrawKernel, params.num_rows, threads, 0, stream, params);
  return LaunchStatus("VocabDrawKernel");
}

}  // namespace tandem::cuda
