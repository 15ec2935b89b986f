// TpShard: which slice of a llama model one tensor-parallel rank holds.
// Attention is split by KV-head groups (each KV head with the query heads
// that attend to it), the feed-forward block by FFN columns (rows of
// W_gate / W_up, columns of W_down). Norms, the embedding and the output head
// are replicated. Splits may be uneven (SmolLM2-135M: 3 KV heads over 2 ranks
// is 2 + 1).
#ifndef TANDEM_ENGINE_PARALLEL_TP_PARTITION_H_
#define TANDEM_ENGINE_PARALLEL_TP_PARTITION_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tandem::parallel {

// FFN ranges start at multiples of this many columns, so a column slice of a
// quantized W_down starts on a block boundary (32 for Q8_0 / Q4_0 / Q4_1).
inline constexpr int32_t kTpFfnAlignment = 32;

// The model dimensions a partition splits.
struct TpDims {
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // divides num_heads
  int ffn_dim = 0;       // FFN columns
};

// Half-open ranges [begin, end) of this rank's heads and FFN columns.
struct TpShard {
  int rank = 0;
  int world_size = 1;
  int kv_head_begin = 0, kv_head_end = 0;
  int q_head_begin = 0, q_head_end = 0;
  int ffn_begin = 0, ffn_end = 0;

  int num_kv_heads() const { return kv_head_end - kv_head_begin; }
  int num_q_heads() const { return q_head_end - q_head_begin; }
  int ffn_size() const { return ffn_end - ffn_begin; }
};

// The shard of `rank` in a world of `world_size`. KV heads are split as
// evenly as possible (the first num_kv_heads % world_size ranks get one
// more); query heads follow their KV heads; FFN columns are split into
// contiguous kTpFfnAlignment-aligned ranges as evenly as possible (the first
// ranks get one more block; a trailing partial block goes to the last rank).
// Fails with InvalidArgument when rank is outside [0, world_size), when
// world_size exceeds num_kv_heads or the number of FFN blocks (naming both
// values), or when the config's heads are inconsistent.
absl::StatusOr<TpShard> PartitionForRank(const TpDims& dims, int rank, int world_size);

}  // namespace tandem::parallel

#endif  // TANDEM_ENGINE_PARALLEL_TP_PARTITION_H_
