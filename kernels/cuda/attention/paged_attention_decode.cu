// Decode attention in two kernels:
//
// DecodePartitionKernel, grid (partition, kv_head, seq), kDecodeThreads
// threads: the `group` = num_heads / num_kv_heads query heads sharing one KV
// head attend together to one partition of the context, so each K/V row is
// loaded once per group. Keys go through shared memory kKeyTile rows at a
// time; scores of the whole partition stay in shared memory, so the softmax is
// the reference's two-pass one (max, then exp and sum) within the partition.
// With one partition the result is final; otherwise each (seq, head,
// partition) leaves its normalized output o_p, max m_p and sum l_p.
//
// DecodeReduceKernel, grid (head, seq): out = Σ_p w_p o_p / Σ_p w_p with
// w_p = l_p e^(m_p - max_p m_p), the online-softmax merge.
#include "kernels/cuda/attention/paged_attention_decode.cuh"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention/paged_kv_tile.cuh"
#include "kernels/cuda/primitives/block_reduce.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int kKeyTile = 32;
constexpr int kReduceThreads = 64;
constexpr int64_t kMaxSharedBytes = 48 * 1024;
constexpr float kNegInf = -INFINITY;

__host__ __device__ inline int IntMin(int a, int b) { return a < b ? a : b; }

// Shared memory of one partition block, in floats: queries [group, head_dim],
// scores [group, partition_size], a K/V tile [kKeyTile, head_dim + 1] (padded
// against bank conflicts), accumulators [group, head_dim], and per-head max
// and sum [group, 2].
struct DecodeSharedLayout {
  int q = 0, scores = 0, tile = 0, acc = 0, stats = 0, total = 0;
};

__host__ __device__ inline DecodeSharedLayout MakeDecodeLayout(int group, int head_dim,
                                                               int partition_size) {
  DecodeSharedLayout l;
  l.q = 0;
  l.scores = l.q + group * head_dim;
  l.tile = l.scores + group * partition_size;
  l.acc = l.tile + kKeyTile * (head_dim + 1);
  l.stats = l.acc + group * head_dim;
  l.total = l.stats + 2 * group;
  return l;
}

// scores[h, t0 + j] = scale * q_h · k_j for the tile's `count` keys.
__device__ void ScoreTile(const float* q, const float* tile, float* scores, int group, int head_dim,
                          int partition_size, int t0, int count, float scale) {
  for (int idx = threadIdx.x; idx < group * kKeyTile; idx += blockDim.x) {
    const int h = idx / kKeyTile;
    const int j = idx % kKeyTile;
    if (j >= count) continue;
    const float* qh = q + h * head_dim;
    const float* kj = tile + j * (head_dim + 1);
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot += qh[d] * kj[d];
    scores[h * partition_size + t0 + j] = dot * scale;
  }
}

// Turns each head's scores into e^(s - max) in place; stats[2h] = max,
// stats[2h + 1] = Σ. One warp per head.
__device__ void SoftmaxScores(float* scores, float* stats, int group, int partition_size,
                              int count) {
  const int lane = threadIdx.x % 32;
  for (int h = threadIdx.x / 32; h < group; h += blockDim.x / 32) {
    float* s = scores + h * partition_size;
    float m = kNegInf;
    for (int j = lane; j < count; j += 32) m = fmaxf(m, s[j]);
    m = WarpAllReduce(m, MaxOp());
    float sum = 0.0f;
    for (int j = lane; j < count; j += 32) {
      s[j] = expf(s[j] - m);
      sum += s[j];
    }
    sum = WarpAllReduce(sum, SumOp());
    if (lane == 0) {
      stats[2 * h] = m;
      stats[2 * h + 1] = sum;
    }
  }
}

// acc[h, d] += Σ_j p[h, t0 + j] v_j[d] over the tile's `count` values.
__device__ void AccumulateTile(const float* scores, const float* tile, float* acc, int group,
                               int head_dim, int partition_size, int t0, int count) {
  for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x) {
    const int h = idx / head_dim;
    const int d = idx % head_dim;
    const float* p = scores + h * partition_size + t0;
    float a = acc[idx];
    for (int j = 0; j < count; ++j) a += p[j] * tile[j * (head_dim + 1) + d];
    acc[idx] = a;
  }
}

// Partial results in the workspace: out [seq, head, partition, head_dim],
// then max and sum, each [seq, head, partition].
struct DecodePartials {
  float* out;
  float* max;
  float* sum;
};

__host__ __device__ inline DecodePartials PartialsIn(void* workspace, int num_seqs, int num_heads,
                                                     int num_partitions, int head_dim) {
  float* base = static_cast<float*>(workspace);
  const int64_t rows = static_cast<int64_t>(num_seqs) * num_heads * num_partitions;
  return {base, base + rows * head_dim, base + rows * head_dim + rows};
}

__device__ void WritePartitionResult(const PagedAttentionDecodeParams& p, int head_dim, int group,
                                     int kv_head, int seq, int part, int num_partitions,
                                     const float* acc, const float* stats) {
  const DecodePartials partials =
      PartialsIn(p.workspace, p.num_seqs, p.num_heads, num_partitions, head_dim);
  for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x) {
    const int h = idx / head_dim;
    const int d = idx % head_dim;
    const int head = kv_head * group + h;
    const float value = acc[idx] * (1.0f / stats[2 * h + 1]);
    if (num_partitions == 1) {
      p.out[(static_cast<int64_t>(seq) * p.num_heads + head) * head_dim + d] = value;
      continue;
    }
    const int64_t row = (static_cast<int64_t>(seq) * p.num_heads + head) * num_partitions + part;
    partials.out[row * head_dim + d] = value;
    if (d == 0) {
      partials.max[row] = stats[2 * h];
      partials.sum[row] = stats[2 * h + 1];
    }
  }
}

// The group's output rows of `seq`, zeroed: the result for an empty context.
__device__ void ZeroOutputRows(const PagedAttentionDecodeParams& p, const PagedKvCache& cache,
                               int kv_head, int seq) {
  const int group = p.num_heads / cache.num_kv_heads;
  float* out = p.out + (static_cast<int64_t>(seq) * p.num_heads + kv_head * group) * cache.head_dim;
  for (int idx = threadIdx.x; idx < group * cache.head_dim; idx += blockDim.x) out[idx] = 0.0f;
}

template <typename T>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodePartitionKernel(PagedAttentionDecodeParams p, PagedKvCache cache, int num_partitions) {
  const int part = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int first = part * p.partition_size;
  const int count = IntMin(p.partition_size, p.context_lens[seq] - first);
  if (count <= 0) {  // the whole block: this sequence is shorter
    if (num_partitions == 1) ZeroOutputRows(p, cache, kv_head, seq);  // an empty context
    return;
  }
  const int head_dim = cache.head_dim;
  const int group = p.num_heads / cache.num_kv_heads;
  const DecodeSharedLayout layout = MakeDecodeLayout(group, head_dim, p.partition_size);
  TANDEM_DYNAMIC_SHARED(float, smem);
  const float* q = p.q + (static_cast<int64_t>(seq) * p.num_heads + kv_head * group) * head_dim;
  for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x) {
    smem[layout.q + idx] = q[idx];
    smem[layout.acc + idx] = 0.0f;
  }
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const T* k = static_cast<const T*>(cache.k);
  const T* v = static_cast<const T*>(cache.v);
  float* tile = smem + layout.tile;
  for (int t0 = 0; t0 < count; t0 += kKeyTile) {
    const int n = IntMin(kKeyTile, count - t0);
    __syncthreads();  // the previous tile's readers are done
    LoadKvTile(k, cache, table, first + t0, n, kv_head, tile, kKeyTile, head_dim + 1);
    __syncthreads();
    ScoreTile(smem + layout.q, tile, smem + layout.scores, group, head_dim, p.partition_size, t0, n,
              p.scale);
  }
  __syncthreads();
  SoftmaxScores(smem + layout.scores, smem + layout.stats, group, p.partition_size, count);
  for (int t0 = 0; t0 < count; t0 += kKeyTile) {
    const int n = IntMin(kKeyTile, count - t0);
    __syncthreads();
    LoadKvTile(v, cache, table, first + t0, n, kv_head, tile, kKeyTile, head_dim + 1);
    __syncthreads();
    AccumulateTile(smem + layout.scores, tile, smem + layout.acc, group, head_dim, p.partition_size,
                   t0, n);
  }
  __syncthreads();
  WritePartitionResult(p, head_dim, group, kv_head, seq, part, num_partitions, smem + layout.acc,
                       smem + layout.stats);
}

__global__ void __launch_bounds__(kReduceThreads)
    DecodeReduceKernel(PagedAttentionDecodeParams p, int head_dim, int num_partitions) {
  const int head = blockIdx.x, seq = blockIdx.y;
  const int len = p.context_lens[seq];
  const int parts = IntMin(num_partitions, (len + p.partition_size - 1) / p.partition_size);
  const DecodePartials partials =
      PartialsIn(p.workspace, p.num_seqs, p.num_heads, num_partitions, head_dim);
  const int64_t row0 = (static_cast<int64_t>(seq) * p.num_heads + head) * num_partitions;
  float m = kNegInf;
  for (int i = 0; i < parts; ++i) m = fmaxf(m, partials.max[row0 + i]);
  float total = 0.0f;
  for (int i = 0; i < parts; ++i) {
    total += partials.sum[row0 + i] * expf(partials.max[row0 + i] - m);
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < parts; ++i) {
      const float w = partials.sum[row0 + i] * expf(partials.max[row0 + i] - m);
      acc += w * partials.out[(row0 + i) * head_dim + d];
    }
    p.out[(static_cast<int64_t>(seq) * p.num_heads + head) * head_dim + d] =
        parts > 0 ? acc / total : 0.0f;
  }
}

absl::Status ValidateDecode(const PagedAttentionDecodeParams& p, const PagedKvCache& cache) {
  if (absl::Status s = ValidatePagedKvCache(cache, p.num_heads); !s.ok()) return s;
  if (p.q == nullptr || p.out == nullptr || p.block_tables == nullptr ||
      p.context_lens == nullptr) {
    return absl::InvalidArgumentError(
        "paged attention decode: q, out, block_tables and context_lens must not be null");
  }
  if (p.num_seqs < 1 || p.num_seqs > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged attention decode: num_seqs ", p.num_seqs, " is outside [1, 65535]"));
  }
  if (p.partition_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged attention decode: partition_size ", p.partition_size, " must be >= 1"));
  }
  const int64_t capacity = static_cast<int64_t>(p.max_blocks_per_seq) * cache.block_size;
  if (p.max_context_len < 1 || p.max_context_len > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("paged attention decode: max_context_len ",
                                                   p.max_context_len, " is outside [1, ", capacity,
                                                   "] (max_blocks_per_seq * block_size)"));
  }
  const int group = p.num_heads / cache.num_kv_heads;
  const int64_t shared_bytes =
      int64_t{4} * MakeDecodeLayout(group, cache.head_dim, p.partition_size).total;
  if (shared_bytes > kMaxSharedBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("paged attention decode: partition_size ", p.partition_size, " with ", group,
                     " query heads per KV head and head_dim ", cache.head_dim, " needs ",
                     shared_bytes, " bytes of shared memory, over the limit of ", kMaxSharedBytes));
  }
  return absl::OkStatus();
}

}  // namespace

int32_t NumDecodePartitions(const PagedAttentionDecodeParams& params) {
  if (params.partition_size < 1) return 0;
  return (params.max_context_len + params.partition_size - 1) / params.partition_size;
}

absl::StatusOr<int64_t> PagedAttentionDecodeWorkspaceBytes(const PagedAttentionDecodeParams& params,
                                                           const PagedKvCache& cache) {
  if (absl::Status s = ValidateDecode(params, cache); !s.ok()) return s;
  const int64_t parts = NumDecodePartitions(params);
  if (parts == 1) return 0;
  return int64_t{4} * params.num_seqs * params.num_heads * parts * (cache.head_dim + 2);
}

absl::Status PagedAttentionDecode(const PagedAttentionDecodeParams& params,
                                  const PagedKvCache& cache, cudaStream_t stream) {
  if (absl::Status s = ValidateDecode(params, cache); !s.ok()) return s;
  const int parts = NumDecodePartitions(params);
  if (parts > 1 && params.workspace == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "paged attention decode: ", parts,
        " partitions need a workspace (PagedAttentionDecodeWorkspaceBytes), got null"));
  }
  const int group = params.num_heads / cache.num_kv_heads;
  const size_t shared_bytes =
      sizeof(float) * MakeDecodeLayout(group, cache.head_dim, params.partition_size).total;
  const dim3 grid(parts, cache.num_kv_heads, params.num_seqs);
  if (cache.dtype == KvCacheDtype::kF32) {
    TANDEM_LAUNCH(DecodePartitionKernel<float>, grid, kDecodeThreads, shared_bytes, stream, params,
                  cache, parts);
  } else {
    TANDEM_LAUNCH(DecodePartitionKernel<__half>, grid, kDecodeThreads, shared_bytes, stream, params,
                  cache, parts);
  }
  if (absl::Status s = LaunchStatus("DecodePartitionKernel"); !s.ok()) return s;
  const dim3 head_grid(params.num_heads, params.num_seqs);
  if (parts == 1) return absl::OkStatus();
  TANDEM_LAUNCH(DecodeReduceKernel, head_grid, kReduceThreads, 0, stream, params, cache.head_dim,
                parts);
  return LaunchStatus("DecodeReduceKernel");
}

}  // namespace tandem::cuda
