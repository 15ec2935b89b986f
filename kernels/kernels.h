// The compute primitives of the forward pass behind one interface. Kernels see
// plain views and Params structs only (no framework types). The CPU
// implementation (kernels/cpu) picks reference, AVX2 or AVX-512 code at run
// time; every optimized path has a reference twin it is tested against.
//
// Thread-safety: kernels are stateless; a call may use `pool` for parallelism
// and returns when all its work is done.
#ifndef TANDEM_KERNELS_KERNELS_H_
#define TANDEM_KERNELS_KERNELS_H_

#include <cstdint>
#include <span>

#include "common/thread_pool.h"
#include "kernels/ggml_type.h"

namespace tandem::kernels {

// Instruction-set level of the CPU kernels.
enum class Isa { kReference = 0, kAvx2 = 1, kAvx512 = 2 };

// The best level this CPU supports, lowered by the environment variable
// TANDEM_ISA=auto|avx512|avx2|scalar (scalar = reference) when set (for tests,
// benchmarks, and CI running the AVX2 path on AVX-512 machines).
Isa BestIsa();
const char* IsaName(Isa isa);

// A weight matrix as stored in the GGUF: `rows` output features, each row
// `cols` input features encoded in `type` blocks, rows `row_bytes` apart.
struct WeightView {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  // Optional: the same rows interleaved 16 at a time (PackRows16). MatMul
  // reads it for a few activation rows at once when PackedRowsUsed(isa, type);
  // the results are bit-identical either way.
  const void* packed = nullptr;
};

// Bytes PackRows16(w) writes; 0 when w's type has no packed form (only Q8_0,
// Q4_0 and Q4_1 have one).
int64_t PackedRows16Bytes(const WeightView& w);
// Writes w's rows interleaved 16 at a time (layout: kernels/cpu/packed_rows16.h)
// to out, PackedRows16Bytes(w) bytes.
void PackRows16(const WeightView& w, uint8_t* out);
// Whether MatMul at `isa` (after ClampIsa) reads WeightView::packed of a
// `type` matrix (false for types without a packed form).
bool PackedRowsUsed(Isa isa, gguf::GgmlType type);

struct MatMulParams {
  Isa isa = Isa::kReference;
  // For Q8_0 / Q4_0 / Q4_1 weights: quantize each 32-element block of x to
  // int8 with one scale (as llama.cpp does) and use integer dot products.
  // When false, weights are dequantized and multiplied in f32 (reference
  // precision).
  bool quantize_activations = true;
};

// y[n, w.rows] = x[n, w.cols] · wᵀ, all f32 row-major, fp32 accumulation.
// Supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K weights.
void MatMul(const WeightView& w, const float* x, int64_t n, float* y, const MatMulParams& params,
            ThreadPool* pool);

// ys[i][n, ws[i].rows] = x[n, cols] · ws[i]ᵀ for matrices that share the
// input (e.g. the q/k/v projections): with quantized activations x is
// quantized once and all rows are split across threads in one parallel loop
// (one synchronization point instead of one per matrix). Every ws[i].cols
// must be equal; ws.size() == ys.size(). Each output is bit-identical to a
// separate MatMul(ws[i], x, n, ys[i], params, pool).
void MatMulMany(std::span<const WeightView> ws, const float* x, int64_t n,
                std::span<float* const> ys, const MatMulParams& params, ThreadPool* pool);

// out[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) * weight.   x, out: [n, dim]
void RmsNorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out);

// RmsNorm with `isa` choosing vector code and rows split over `pool` (may be
// null). Versus the reference above the results differ by fp32 rounding
// (relative 1e-5 is ample); for one isa each row's bits do not depend on n,
// the other rows or the thread count.
void RmsNorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out,
             Isa isa, ThreadPool* pool);

// Rotary embedding in place, llama "normal" convention (GGUF's llama layout):
// the pair (x[2i], x[2i+1]) of each head is rotated by pos * base^(-2i/rope_dim)
// for 2i < rope_dim.   x: [num_tokens, num_heads, head_dim], positions: [num_tokens]
void Rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
          int64_t head_dim, int64_t rope_dim, float freq_base);

// gate[i] = silu(gate[i]) * up[i] for i < n.
void SiluMul(float* gate, const float* up, int64_t n);

// SiluMul with `isa` choosing vector code (a polynomial exp, relative error
// < 3e-7) and elements split over `pool` (may be null). Each element's bits
// depend only on gate[i], up[i] and isa.
void SiluMul(float* gate, const float* up, int64_t n, Isa isa, ThreadPool* pool);

// The log-softmax normalizer of a logits row: max = the largest x[i] (NaN
// counts as -inf; -inf when every x[i] is) and sum = Σ e^(x[i] - max) (0 when
// max is not finite), so that log_softmax(x)_i = x_i - (max + log(sum)).
struct SoftmaxNormalizer {
  float max = 0.0f;
  double sum = 0.0;
};
// The plain loop (std::exp in float, the sum in double).
SoftmaxNormalizer LogSoftmaxNormalizer(const float* x, int64_t n);
// With `isa` choosing vector code (a polynomial exp, relative error < 3e-7;
// the sum in double per lane, then a fixed tree): versus the loop above the
// sum differs by a relative 1e-6 at most. Deterministic for one isa.
SoftmaxNormalizer LogSoftmaxNormalizer(const float* x, int64_t n, Isa isa);

// x[i] += y[i] for i < n.
void Add(float* x, const float* y, int64_t n);

// Add with elements split over `pool` (may be null). Each element is one IEEE
// addition, so the bits equal the plain Add's.
void Add(float* x, const float* y, int64_t n, ThreadPool* pool);

enum class KvDtype { kF32 = 0, kF16 = 1 };

// One layer of the paged KV cache. K and V are each laid out
// [num_blocks, block_size, num_kv_heads, head_dim] of `dtype`.
struct PagedKvView {
  void* k = nullptr;
  void* v = nullptr;
  KvDtype dtype = KvDtype::kF32;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

// Writes K and V of `num_tokens` new tokens into their slots
// (slot = block_id * block_size + offset in block).
// k, v: [num_tokens, num_kv_heads, head_dim]; slots: [num_tokens]
void WriteKv(const PagedKvView& cache, const float* k, const float* v, const int64_t* slots,
             int64_t num_tokens);

// Copies whole blocks (copy-on-write): dst[i] <- src[i].
void CopyKvBlocks(const PagedKvView& cache, const int32_t* src, const int32_t* dst,
                  int64_t num_copies);

// One sequence's queries in a batch: rows [q_begin, q_begin + q_len) of q are
// its tokens at positions start_pos .. start_pos + q_len - 1; query row i
// attends causally to cached positions [0, start_pos + i], whose K/V are found
// through `block_table` (num_blocks entries).
struct AttentionSeq {
  int64_t q_begin = 0;
  int64_t q_len = 0;
  int64_t start_pos = 0;
  const int32_t* block_table = nullptr;
  int64_t num_blocks = 0;
};

struct AttentionParams {
  Isa isa = Isa::kReference;
  int32_t num_heads = 0;  // query heads; num_heads % cache.num_kv_heads == 0 (GQA)
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
};

// Causal grouped-query attention over the paged cache, for a batch mixing
// prefill chunks and single decode tokens without padding. The batch's own
// K/V must already be written (WriteKv).
// q, out: [num_tokens, num_heads, head_dim]
void PagedAttention(const float* q, std::span<const AttentionSeq> seqs, const PagedKvView& cache,
                    const AttentionParams& params, float* out, ThreadPool* pool);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_KERNELS_H_
