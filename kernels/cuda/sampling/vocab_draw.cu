// VocabDrawKernel: one block per row, kVocabDrawThreads threads (fewer,
// in whole warps, for a vocabulary smaller than that). Every helper is
// block-wide (all threads call it and get the same answer: the reductions of
// block_reduce.cuh hand every thread the same bits), so the control flow
// stays uniform across the block.
#include "kernels/cuda/sampling/vocab_draw.cuh"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/counter_rng.h"
#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/primitives/float_key.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/cuda/sampling/draft_prob.cuh"
#include "kernels/cuda/sampling/vocab_candidates.cuh"

namespace tandem::cuda {
namespace {

using vocab::FindCrossing;
using vocab::Filter;
using vocab::LastPositive;
using vocab::MassAtLeast;
using vocab::Row;
using vocab::Scratch;

constexpr int kVocabDrawThreads = 256;

// The verification's shared memory: one chunk of residuals and the walk's
// answer, which thread 0 hands to the block.
struct Walk {
  double* chunk;  // [blockDim.x]
  double* running;
  int32_t* found;
};

// The draft's row and the call's supports.
struct Draft {
  const VerifyDraftRowParams& row;
  const int32_t* support_tokens;
  const float* support_probs;
};

// max(0, p(t) - q(t)) for token t (0 past the vocabulary, for a cut or dead
// t, and for NaN), in double as the CPU verifier computes it.
__device__ __forceinline__ double ResidualOf(const Row& r, const Filter& f, double total,
                                             const Draft& d, int32_t t) {
  if (t >= r.vocab_size) return 0.0;
  const float l = r.logits[t];
  if (!vocab::Live(r, l)) return 0.0;
  const uint32_t wb = vocab::WeightBits(r, l);
  if (!vocab::Kept(f, wb, t)) return 0.0;
  const double residual =
      static_cast<double>(__uint_as_float(wb)) / total -
      static_cast<double>(DraftProb(d.row, d.support_tokens, d.support_probs, t));
  return residual > 0.0 ? residual : 0.0;
}

// Thread 0 walks one chunk in token order from `running`: the first token
// at which the running sum exceeds `target`, else -1; the walk's sum lands
// in `w` for the block.
__device__ int32_t WalkChunk(int32_t base, double running, double target, const Walk& w) {
  __syncthreads();  // the chunk is written
  if (threadIdx.x == 0) {
    *w.found = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(blockDim.x); ++i) {
      if (w.chunk[i] <= 0.0) continue;
      running += w.chunk[i];
      if (running > target) {
        *w.found = base + i;
        break;
      }
    }
    *w.running = running;
  }
  __syncthreads();
  const int32_t found = *w.found;
  __syncthreads();  // read before the next chunk overwrites
  return found;
}

// The residual draw over max(0, p - q) by inverse CDF in token order with
// u: the token, or -1 when the residual has no mass.
__device__ int32_t DrawResidual(const Row& r, const Filter& f, double total, const Draft& d,
                                double u, const Scratch& s, const Walk& w) {
  double mass = 0.0;
  for (int32_t base = 0; base < r.vocab_size; base += blockDim.x) {
    mass += BlockAllReduce(ResidualOf(r, f, total, d, base + threadIdx.x), SumOp(), s.sums);
  }
  if (!(mass > 0.0) || !isfinite(mass)) return -1;
  const double target = u * mass;
  double running = 0.0;
  for (int32_t base = 0; base < r.vocab_size; base += blockDim.x) {
    const double residual = ResidualOf(r, f, total, d, base + threadIdx.x);
    const double chunk_mass = BlockAllReduce(residual, SumOp(), s.sums);
    if (!(chunk_mass > 0.0)) continue;
    if (running + chunk_mass <= target) {
      running += chunk_mass;
      continue;
    }
    w.chunk[threadIdx.x] = residual;
    if (const int32_t found = WalkChunk(base, running, target, w); found >= 0) return found;
    running = *w.running;  // rounding: the walk stayed short of the tree sum
  }
  // The walk fell short: the last token of positive residual, as the CPU.
  int32_t last = -1;
  for (int32_t t = threadIdx.x; t < r.vocab_size; t += blockDim.x) {
    if (ResidualOf(r, f, total, d, t) > 0.0) last = t;
  }
  return BlockAllReduce(last, MaxOp(), s.counts);
}

// The verification of d.row's draft over the kept candidates (the file
// comment of vocab_draw.cuh): *token becomes the emitted token (the draw
// stands when the residual has no mass); returns whether d was accepted.
__device__ bool VerifyDraft(const Row& r, const Filter& f, double total, const Draft& d,
                            const Scratch& s, const Walk& w, int32_t* token) {
  const VerifyDraftRowParams& v = d.row;
  double p_d = 0.0;
  if (v.draft < r.vocab_size) {
    const float l = r.logits[v.draft];
    if (vocab::Live(r, l) && vocab::Kept(f, vocab::WeightBits(r, l), v.draft)) {
      p_d = static_cast<double>(__uint_as_float(vocab::WeightBits(r, l))) / total;
    }
  }
  const double u =
      kernels::UniformDraw(v.seed, v.stream, v.step, kernels::DrawPurpose::kSpeculativeAccept);
  // u < p/q without the division (q(d) > 0); NaN compares false: rejected.
  if (u * static_cast<double>(v.q_draft) < p_d) {
    *token = v.draft;
    return true;
  }
  const int32_t drawn = DrawResidual(
      r, f, total, d,
      kernels::UniformDraw(v.seed, v.stream, v.step, kernels::DrawPurpose::kSpeculativeResidual),
      s, w);
  if (drawn >= 0) *token = drawn;
  return false;
}

__global__ void __launch_bounds__(kVocabDrawThreads) VocabDrawKernel(VocabDrawParams p) {
  __shared__ double sums[kMaxWarpsPerBlock];
  __shared__ int32_t counts[kMaxWarpsPerBlock];
  __shared__ uint32_t bits[kMaxWarpsPerBlock];
  __shared__ double chunk[kVocabDrawThreads];
  __shared__ double walk_running;
  __shared__ int32_t walk_found;
  const Scratch s{sums, counts, bits};
  const VocabDrawRowParams params = p.rows[blockIdx.x];
  if (params.skip) return;  // the whole block
  const float* logits = p.logits + static_cast<int64_t>(blockIdx.x) * p.vocab_size;
  int32_t num_live = 0;
  const Row r = vocab::CandidateRow(logits, p.vocab_size, params.top_k, &num_live, s);
  if (num_live == 0) {
    if (threadIdx.x == 0) p.out_tokens[blockIdx.x] = kNoDraw;
    return;
  }
  const Filter f = vocab::TopPMinPFilter(r, params.top_p, params.min_p, s);
  const double total = MassAtLeast(r, f, 0, s);
  const double u = kernels::UniformDraw(params.draw.seed, params.draw.stream, params.draw.step);
  uint32_t at_bits = 0;
  int32_t token = 0;
  if (!FindCrossing(r, f, u * total, /*reaches=*/false, s, &at_bits, &token)) {
    token = LastPositive(r, f, s);
  }
  const bool verifies = p.verify != nullptr && p.verify[blockIdx.x].draft >= 0;
  bool accepted = false;
  if (verifies) {
    const Draft d{p.verify[blockIdx.x], p.support_tokens, p.support_probs};
    accepted = VerifyDraft(r, f, total, d, s, {chunk, &walk_running, &walk_found},
                           &token);
  }
  if (threadIdx.x != 0) return;
  p.out_tokens[blockIdx.x] = token;
  if (verifies) p.accepted[blockIdx.x] = accepted ? 1 : 0;
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
  if (params.verify != nullptr && params.accepted == nullptr) {
    return absl::InvalidArgumentError("vocab draw: verify needs accepted");
  }
  // A small vocabulary gets a smaller block (whole warps: the reductions need them).
  const int threads = std::min(kVocabDrawThreads, (params.vocab_size + 31) / 32 * 32);
  TANDEM_LAUNCH(VocabDrawKernel, params.num_rows, threads, 0, stream, params);
  return LaunchStatus("VocabDrawKernel");
}

}  // namespace tandem::cuda
