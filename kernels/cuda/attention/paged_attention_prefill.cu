// PrefillKernel, grid (query tile, kv_head, seq), kPrefillThreads threads:
// the block takes `query_tile` consecutive query tokens of one sequence and
// the `group` query heads sharing one KV head — rows r = token * group + head
// — and walks the keys [0, last query's position] kPrefillKeyTile at a time
// through shared memory. Per key tile: scores S = scale * Q Kᵀ with the causal
// mask, then per row the online-softmax update (m' = max(m, max S), rescale
// the running sum and accumulator by e^(m - m'), add e^(S - m')), then the
// accumulator gains P V. Rows end as acc / sum.
#include "kernels/cuda/attention/paged_attention_prefill.cuh"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention/paged_kv_tile.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kPrefillThreads = 128;
constexpr int kPrefillKeyTile = 16;
constexpr int kMaxQueryTile = 16;
constexpr int64_t kMaxSharedBytes = 48 * 1024;
constexpr float kNegInf = -INFINITY;

__host__ __device__ inline int IntMin(int a, int b) { return a < b ? a : b; }

// Shared memory in floats for `rows` = query_tile * group rows: queries and
// accumulators [rows, head_dim] each, scores [rows, kPrefillKeyTile + 1], a
// K/V tile [kPrefillKeyTile, head_dim + 1] (rows padded against bank
// conflicts), running max, sum and rescale factor [rows] each.
struct PrefillSharedLayout {
  int q = 0, acc = 0, scores = 0, tile = 0, max = 0, sum = 0, corr = 0, total = 0;
};

__host__ __device__ inline PrefillSharedLayout MakePrefillLayout(int rows, int head_dim) {
  PrefillSharedLayout l;
  l.acc = l.q + rows * head_dim;
  l.scores = l.acc + rows * head_dim;
  l.tile = l.scores + rows * (kPrefillKeyTile + 1);
  l.max = l.tile + kPrefillKeyTile * (head_dim + 1);
  l.sum = l.max + rows;
  l.corr = l.sum + rows;
  l.total = l.corr + rows;
  return l;
}

// What one block works on.
struct PrefillTile {
  int group;  // query heads per KV head
  int head_dim;
  int kv_head;
  int first_token;  // within the sequence
  int rows;         // active rows: tokens in this tile * group
  int first_pos;    // position of the tile's first query token
};

__device__ void LoadQueries(const PagedAttentionPrefillParams& p, const PagedAttentionSeq& seq,
                            const PrefillTile& t, float* smem, const PrefillSharedLayout& layout) {
  for (int idx = threadIdx.x; idx < t.rows * t.head_dim; idx += blockDim.x) {
    const int r = idx / t.head_dim;
    const int d = idx % t.head_dim;
    const int64_t token = seq.q_begin + t.first_token + r / t.group;
    const int head = t.kv_head * t.group + r % t.group;
    smem[layout.q + idx] = p.q[(token * p.num_heads + head) * t.head_dim + d];
    smem[layout.acc + idx] = 0.0f;
  }
  for (int r = threadIdx.x; r < t.rows; r += blockDim.x) {
    smem[layout.max + r] = kNegInf;
    smem[layout.sum + r] = 0.0f;
  }
}

// S[r, j] = scale * q_r · k_j, or -inf for a key past row r's position or
// past the tile's `count` keys.
__device__ void ScoreTile(const PrefillTile& t, float* smem, const PrefillSharedLayout& layout,
                          int key0, int count, float scale) {
  constexpr int kStride = kPrefillKeyTile + 1;
  for (int idx = threadIdx.x; idx < t.rows * kPrefillKeyTile; idx += blockDim.x) {
    const int r = idx / kPrefillKeyTile;
    const int j = idx % kPrefillKeyTile;
    const int pos = key0 + j;
    float s = kNegInf;
    if (j < count && pos <= t.first_pos + r / t.group) {
      const float* q = smem + layout.q + r * t.head_dim;
      const float* k = smem + layout.tile + j * (t.head_dim + 1);
      float dot = 0.0f;
      for (int d = 0; d < t.head_dim; ++d) dot += q[d] * k[d];
      s = dot * scale;
    }
    smem[layout.scores + r * kStride + j] = s;
  }
}

// Online-softmax step, one thread per row: scores become e^(S - m'), the
// running sum is rescaled and extended, corr[r] = e^(m - m') for the
// accumulator.
__device__ void UpdateRowStats(const PrefillTile& t, float* smem,
                               const PrefillSharedLayout& layout) {
  constexpr int kStride = kPrefillKeyTile + 1;
  for (int r = threadIdx.x; r < t.rows; r += blockDim.x) {
    float* s = smem + layout.scores + r * kStride;
    const float m = smem[layout.max + r];
    float m_new = m;
    for (int j = 0; j < kPrefillKeyTile; ++j) m_new = fmaxf(m_new, s[j]);
    if (m_new == kNegInf) {  // nothing visible yet: keep the state, add nothing
      for (int j = 0; j < kPrefillKeyTile; ++j) s[j] = 0.0f;
      smem[layout.corr + r] = 1.0f;
      continue;
    }
    float sum = 0.0f;
    for (int j = 0; j < kPrefillKeyTile; ++j) {
      s[j] = expf(s[j] - m_new);
      sum += s[j];
    }
    const float corr = expf(m - m_new);  // 0 when m is -inf
    smem[layout.sum + r] = smem[layout.sum + r] * corr + sum;
    smem[layout.max + r] = m_new;
    smem[layout.corr + r] = corr;
  }
}

// acc[r, d] = acc[r, d] * corr[r] + Σ_j P[r, j] v_j[d] over the tile's keys.
__device__ void AccumulateTile(const PrefillTile& t, float* smem, const PrefillSharedLayout& layout,
                               int count) {
  constexpr int kStride = kPrefillKeyTile + 1;
  for (int idx = threadIdx.x; idx < t.rows * t.head_dim; idx += blockDim.x) {
    const int r = idx / t.head_dim;
    const int d = idx % t.head_dim;
    const float* p = smem + layout.scores + r * kStride;
    const float* v = smem + layout.tile + d;
    float a = smem[layout.acc + idx] * smem[layout.corr + r];
    for (int j = 0; j < count; ++j) a += p[j] * v[j * (t.head_dim + 1)];
    smem[layout.acc + idx] = a;
  }
}

__device__ void WriteOutput(const PagedAttentionPrefillParams& p, const PagedAttentionSeq& seq,
                            const PrefillTile& t, const float* smem,
                            const PrefillSharedLayout& layout) {
  for (int idx = threadIdx.x; idx < t.rows * t.head_dim; idx += blockDim.x) {
    const int r = idx / t.head_dim;
    const int d = idx % t.head_dim;
    const int64_t token = seq.q_begin + t.first_token + r / t.group;
    const int head = t.kv_head * t.group + r % t.group;
    p.out[(token * p.num_heads + head) * t.head_dim + d] =
        smem[layout.acc + idx] * (1.0f / smem[layout.sum + r]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kPrefillThreads)
    PrefillKernel(PagedAttentionPrefillParams p, PagedKvCache cache, int query_tile) {
  const PagedAttentionSeq seq = p.seqs[blockIdx.z];
  PrefillTile t;
  t.first_token = blockIdx.x * query_tile;
  if (t.first_token >= seq.q_len) return;  // the whole block: a shorter sequence
  t.group = p.num_heads / cache.num_kv_heads;
  t.head_dim = cache.head_dim;
  t.kv_head = blockIdx.y;
  t.rows = IntMin(query_tile, seq.q_len - t.first_token) * t.group;
  t.first_pos = seq.start_pos + t.first_token;
  const PrefillSharedLayout layout = MakePrefillLayout(query_tile * t.group, t.head_dim);
  TANDEM_DYNAMIC_SHARED(float, smem);
  LoadQueries(p, seq, t, smem, layout);
  const int32_t* table = p.block_tables + static_cast<int64_t>(blockIdx.z) * p.max_blocks_per_seq;
  const int key_end = t.first_pos + t.rows / t.group;  // past the last query's position
  for (int key0 = 0; key0 < key_end; key0 += kPrefillKeyTile) {
    const int count = IntMin(kPrefillKeyTile, key_end - key0);
    __syncthreads();  // the previous tile's readers are done
    LoadKvTile(static_cast<const T*>(cache.k), cache, table, key0, count, t.kv_head,
               smem + layout.tile, kPrefillKeyTile, t.head_dim + 1);
    __syncthreads();
    ScoreTile(t, smem, layout, key0, count, p.scale);
    __syncthreads();  // scores written, K tile no longer read
    UpdateRowStats(t, smem, layout);
    LoadKvTile(static_cast<const T*>(cache.v), cache, table, key0, count, t.kv_head,
               smem + layout.tile, kPrefillKeyTile, t.head_dim + 1);
    __syncthreads();
    AccumulateTile(t, smem, layout, count);
  }
  __syncthreads();
  WriteOutput(p, seq, t, smem, layout);
}

absl::Status ValidatePrefill(const PagedAttentionPrefillParams& p, const PagedKvCache& cache) {
  if (absl::Status s = ValidatePagedKvCache(cache, p.num_heads); !s.ok()) return s;
  if (p.q == nullptr || p.out == nullptr || p.seqs == nullptr || p.block_tables == nullptr) {
    return absl::InvalidArgumentError(
        "paged attention prefill: q, out, seqs and block_tables must not be null");
  }
  if (p.num_seqs < 1 || p.num_seqs > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged attention prefill: num_seqs ", p.num_seqs, " is outside [1, 65535]"));
  }
  if (p.max_q_len < 1 || p.max_blocks_per_seq < 1) {
    return absl::InvalidArgumentError(absl::StrCat("paged attention prefill: max_q_len ",
                                                   p.max_q_len, " and max_blocks_per_seq ",
                                                   p.max_blocks_per_seq, " must be >= 1"));
  }
  const int32_t group = p.num_heads / cache.num_kv_heads;
  if (PrefillQueryTile(group, cache.head_dim) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged attention prefill: ", group, " query heads per KV head with head_dim ",
        cache.head_dim, " need more than the ", kMaxSharedBytes, " bytes of shared memory"));
  }
  return absl::OkStatus();
}

}  // namespace

int32_t PrefillQueryTile(int32_t group, int32_t head_dim) {
  for (int32_t tile = kMaxQueryTile; tile >= 1; --tile) {
    const int64_t bytes = int64_t{4} * MakePrefillLayout(tile * group, head_dim).total;
    if (bytes <= kMaxSharedBytes) return tile;
  }
  return 0;
}

absl::Status PagedAttentionPrefill(const PagedAttentionPrefillParams& params,
                                   const PagedKvCache& cache, cudaStream_t stream) {
  if (absl::Status s = ValidatePrefill(params, cache); !s.ok()) return s;
  const int group = params.num_heads / cache.num_kv_heads;
  const int query_tile = PrefillQueryTile(group, cache.head_dim);
  const size_t shared_bytes =
      sizeof(float) * MakePrefillLayout(query_tile * group, cache.head_dim).total;
  const dim3 grid((params.max_q_len + query_tile - 1) / query_tile, cache.num_kv_heads,
                  params.num_seqs);
  if (cache.dtype == KvCacheDtype::kF32) {
    TANDEM_LAUNCH(PrefillKernel<float>, grid, kPrefillThreads, shared_bytes, stream, params, cache,
                  query_tile);
  } else {
    TANDEM_LAUNCH(PrefillKernel<__half>, grid, kPrefillThreads, shared_bytes, stream, params, cache,
                  query_tile);
  }
  return LaunchStatus("PrefillKernel");
}

}  // namespace tandem::cuda
