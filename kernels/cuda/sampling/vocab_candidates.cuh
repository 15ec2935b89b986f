// The whole-vocabulary candidate set of a sampling row, for VocabDraw
// (vocab_draw.cuh): which logits are candidates (live, and >= the k-th
// largest under top-k), their weights e^(l - max) as float bits, the kept
// subset after the top-p cut and min-p (a Filter: a position in the
// canonical order, weight bits descending then token ascending, and a
// weight floor), and the block-wide searches over it (masses at or above a
// weight, the running-mass crossing found by bisection over weight bits,
// ties counted in token order). Nothing is sorted or collected.
//
// Every function is block-wide: all threads of the block call it with the
// same arguments and get the same answer (block_reduce.cuh hands every
// thread the same bits), so control flow stays uniform. Scratch points at
// kMaxWarpsPerBlock entries of shared memory each.
#ifndef TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_CANDIDATES_CUH_
#define TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_CANDIDATES_CUH_

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/primitives/float_key.cuh"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda::vocab {

inline constexpr float kNegInf = -INFINITY;
inline constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the largest weight

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
__device__ __forceinline__ double MassAtLeast(const Row& r, const Filter& f, uint32_t bits, const Scratch& s) {
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
__device__ __forceinline__ int32_t CountTies(const Row& r, const Filter& f, uint32_t bits, int32_t last_token,
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
__device__ __forceinline__ int32_t NthTie(const Row& r, const Filter& f, uint32_t bits, int32_t j,
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
__device__ __forceinline__ bool FindCrossing(const Row& r, const Filter& f, double target, bool reaches,
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

// The kept candidates after the top-p cut (the first candidate at which the
// running mass reaches top_p * Σ; top_p >= 1: off) and the min-p floor
// (weights >= min_p; min_p <= 0: off).
__device__ __forceinline__ Filter TopPMinPFilter(const Row& r, float top_p, float min_p,
                                                 const Scratch& s) {
  Filter f;
  if (top_p < 1.0f) {
    const double target = static_cast<double>(top_p) * MassAtLeast(r, f, 0, s);
    uint32_t cut_bits = 0;
    int32_t cut_token = 0;
    if (FindCrossing(r, f, target, /*reaches=*/true, s, &cut_bits, &cut_token)) {
      f.cut_bits = cut_bits;
      f.cut_token = cut_token;
    }
  }
  if (min_p > 0.0f) f.min_bits = __float_as_uint(min_p);
  return f;
}

// How many candidates `f` keeps.
__device__ __forceinline__ int32_t CountKept(const Row& r, const Filter& f, const Scratch& s) {
  int32_t count = 0;
  for (int32_t i = threadIdx.x; i < r.vocab_size; i += blockDim.x) {
    const float l = r.logits[i];
    if (Live(r, l) && Kept(f, WeightBits(r, l), i)) ++count;
  }
  return BlockAllReduce(count, SumOp(), s.counts);
}

// The lightest positive and the heaviest weight bits among the kept
// candidates (UINT_MAX / 0 when there are none).
__device__ __forceinline__ void KeptWeightRange(const Row& r, const Filter& f, const Scratch& s,
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
__device__ __forceinline__ int32_t TieEnd(const Row& r, const Filter& f, uint32_t bits, bool highest,
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
__device__ __forceinline__ int32_t LastPositive(const Row& r, const Filter& f, const Scratch& s) {
  uint32_t lightest = 0, heaviest = 0;
  KeptWeightRange(r, f, s, &lightest, &heaviest);
  if (lightest != UINT_MAX) return TieEnd(r, f, lightest, /*highest=*/true, s);
  return TieEnd(r, f, heaviest, /*highest=*/false, s);
}

// The row's largest live logit (+inf clamped) and its number of live logits.
__device__ __forceinline__ float MaxLive(const float* logits, int32_t vocab_size, int32_t* num_live,
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

// The candidates of `logits` under top-k (off when top_k <= 0 or the row
// has at most top_k live logits: its k-th largest bounds them, ties kept);
// *num_live gets the number of live logits.
__device__ __forceinline__ Row CandidateRow(const float* logits, int32_t vocab_size, int32_t top_k,
                                            int32_t* num_live, const Scratch& s) {
  const float max_logit = MaxLive(logits, vocab_size, num_live, s);
  const bool bounded = top_k > 0 && *num_live > top_k;
  return {logits, vocab_size, max_logit,
          bounded ? BlockKthLargest(logits, vocab_size, top_k, s.counts) : kNegInf};
}

}  // namespace tandem::cuda::vocab

#endif  // TANDEM_KERNELS_CUDA_SAMPLING_VOCAB_CANDIDATES_CUH_
