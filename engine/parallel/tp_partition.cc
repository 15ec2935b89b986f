#include "engine/parallel/tp_partition.h"

#include "absl/strings/str_format.h"

namespace tandem::parallel {
namespace {

// [begin, end) of part `i` when `total` items are split over `parts` as
// evenly as possible, the first total % parts parts one larger.
void EvenSplit(int total, int parts, int i, int* begin, int* end) {
  const int base = total / parts;
  const int extra = total % parts;
  *begin = i * base + (i < extra ? i : extra);
  *end = *begin + base + (i < extra ? 1 : 0);
}

}  // namespace

absl::StatusOr<TpShard> PartitionForRank(const TpDims& c, int rank, int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor-parallel world size %d must be at least 1", world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor-parallel rank %d is out of range: the world has %d ranks", rank, world_size));
  }
  if (c.num_kv_heads <= 0 || c.num_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d query heads cannot be grouped over %d KV heads", c.num_heads, c.num_kv_heads));
  }
  if (world_size > c.num_kv_heads) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor-parallel world size %d exceeds the model's %d KV heads (the unit of the "
        "attention split)",
        world_size, c.num_kv_heads));
  }
  const int ffn_blocks = c.ffn_dim / kTpFfnAlignment;
  if (world_size > ffn_blocks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor-parallel world size %d exceeds the model's %d FFN blocks of %d columns",
        world_size, ffn_blocks, kTpFfnAlignment));
  }
  TpShard s;
  s.rank = rank;
  s.world_size = world_size;
  EvenSplit(c.num_kv_heads, world_size, rank, &s.kv_head_begin, &s.kv_head_end);
  const int group = c.num_heads / c.num_kv_heads;
  s.q_head_begin = s.kv_head_begin * group;
  s.q_head_end = s.kv_head_end * group;
  EvenSplit(ffn_blocks, world_size, rank, &s.ffn_begin, &s.ffn_end);
  s.ffn_begin *= kTpFfnAlignment;
  s.ffn_end *= kTpFfnAlignment;
  if (rank == world_size - 1) s.ffn_end = c.ffn_dim;  // the partial block, if any
  return s;
}

}  // namespace tandem::parallel
