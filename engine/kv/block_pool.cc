#include "engine/kv/block_pool.h"

#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace tandem::kv {

BlockPool::BlockPool(int32_t num_blocks) {
  CHECK(num_blocks >= 0, "num_blocks %d must be >= 0", num_blocks);
  ref_counts_.assign(num_blocks, 0);
  is_free_.assign(num_blocks, 1);
  free_list_.reserve(num_blocks);
  // Highest id at the bottom of the stack so block 0 is handed out first.
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_list_.push_back(BlockId(i));
}

void BlockPool::CheckInRange(BlockId block) const {
  CHECK(block.value() >= 0 && block.value() < num_blocks(), "block %d out of range [0, %d)",
        block.value(), num_blocks());
}

std::optional<BlockId> BlockPool::Allocate() {
  if (free_list_.empty()) return std::nullopt;
  BlockId block = free_list_.back();
  free_list_.pop_back();
  is_free_[block.value()] = 0;
  ref_counts_[block.value()] = 1;
  ++num_used_;
  return block;
}

void BlockPool::IncRef(BlockId block) {
  CheckInRange(block);
  CHECK(!is_free_[block.value()], "IncRef of block %d, which is on the free list", block.value());
  if (ref_counts_[block.value()]++ == 0) ++num_used_;
}

int32_t BlockPool::DecRef(BlockId block) {
  CheckInRange(block);
  int32_t& count = ref_counts_[block.value()];
  CHECK(count > 0, "DecRef of block %d with ref count %d", block.value(), count);
  if (--count == 0) --num_used_;
  return count;
}

void BlockPool::Release(BlockId block) {
  CheckInRange(block);
  CHECK(ref_counts_[block.value()] == 0, "Release of block %d with ref count %d", block.value(),
        ref_counts_[block.value()]);
  CHECK(!is_free_[block.value()], "Release of block %d, already free", block.value());
  is_free_[block.value()] = 1;
  free_list_.push_back(block);
}

int32_t BlockPool::ref_count(BlockId block) const {
  CheckInRange(block);
  return ref_counts_[block.value()];
}

bool BlockPool::IsFree(BlockId block) const {
  CheckInRange(block);
  return is_free_[block.value()] != 0;
}

absl::Status BlockPool::CheckConsistency() const {
  std::vector<uint8_t> seen(num_blocks(), 0);
  for (BlockId block : free_list_) {
    if (block.value() < 0 || block.value() >= num_blocks()) {
      return absl::InternalError(
          absl::StrFormat("free list holds block %d, out of range [0, %d)", block.value(),
                          num_blocks()));
    }
    if (seen[block.value()]++) {
      return absl::InternalError(
          absl::StrFormat("block %d is on the free list twice", block.value()));
    }
    if (!is_free_[block.value()]) {
      return absl::InternalError(
          absl::StrFormat("block %d is on the free list but not flagged free", block.value()));
    }
    if (ref_counts_[block.value()] != 0) {
      return absl::InternalError(absl::StrFormat("free block %d has ref count %d", block.value(),
                                                 ref_counts_[block.value()]));
    }
  }
  int32_t used = 0;
  for (int32_t i = 0; i < num_blocks(); ++i) {
    if (is_free_[i] && !seen[i]) {
      return absl::InternalError(
          absl::StrFormat("block %d is flagged free but not on the free list", i));
    }
    if (ref_counts_[i] < 0) {
      return absl::InternalError(
          absl::StrFormat("block %d has negative ref count %d", i, ref_counts_[i]));
    }
    if (ref_counts_[i] > 0) ++used;
  }
  if (used != num_used_) {
    return absl::InternalError(
        absl::StrFormat("num_used is %d but %d blocks have ref count > 0", num_used_, used));
  }
  return absl::OkStatus();
}

}  // namespace tandem::kv
