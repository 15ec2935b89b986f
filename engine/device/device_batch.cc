#include "engine/device/device_batch.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace tandem::device {
absl::StatusOr<DeviceBatch> DeviceBatch::Create(int32_t max_tokens, int32_t max_blocks_per_seq,
                                                int32_t block_size) {
  DeviceBatch b;
  b.max_tokens_ = max_tokens;
  b.max_blocks_capacity_ = max_blocks_per_seq;
  b.block_size_ = block_size;
  const int64_t t = max_tokens;
  using cuda::DeviceBuffer;
  ASSIGN_OR_RETURN(b.token_ids_, DeviceBuffer::Allocate(t * sizeof(int32_t), "batch token ids"));
  ASSIGN_OR_RETURN(b.positions_, DeviceBuffer::Allocate(t * sizeof(int32_t), "batch positions"));
  ASSIGN_OR_RETURN(b.slots_, DeviceBuffer::Allocate(t * sizeof(int64_t), "batch KV slots"));
  ASSIGN_OR_RETURN(b.seqs_, DeviceBuffer::Allocate(t * sizeof(cuda::PagedAttentionSeq),
                                                   "batch attention sequences"));
  ASSIGN_OR_RETURN(b.tables_, DeviceBuffer::Allocate(t * max_blocks_per_seq * sizeof(int32_t),
                                                     "batch block tables"));
  ASSIGN_OR_RETURN(b.context_lens_,
                   DeviceBuffer::Allocate(t * sizeof(int32_t), "batch context lengths"));
  return b;
}

absl::Status DeviceBatch::Upload(std::span<const model::ForwardSequence> batch,
                                 cudaStream_t stream, int32_t pad_context_to) {
  int64_t tokens = 0;
  int32_t max_blocks = 0;
  for (const model::ForwardSequence& s : batch) {
    tokens += static_cast<int64_t>(s.tokens.size());
    const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
    max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>((end + block_size_ - 1) / block_size_));
  }
  if (tokens > max_tokens_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the forward batch has %d tokens, the device runner is sized for %d "
        "(--max-batched-tokens)", tokens, max_tokens_));
  }
  if (max_blocks > max_blocks_capacity_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a sequence needs %d KV blocks, the device runner holds block tables of %d", max_blocks,
        max_blocks_capacity_));
  }
  num_tokens_ = static_cast<int32_t>(tokens);
  num_seqs_ = static_cast<int32_t>(batch.size());
  const int32_t padded_context = std::min(pad_context_to, context_capacity());
  max_blocks_ = std::max({1, max_blocks, (padded_context + block_size_ - 1) / block_size_});
  max_q_len_ = 0;
  max_context_len_ = 0;
  h_token_ids_.clear();
  h_positions_.clear();
  h_slots_.clear();
  h_seqs_.clear();
  h_context_lens_.clear();
  h_tables_.assign(static_cast<size_t>(num_seqs_) * max_blocks_, 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const model::ForwardSequence& s = batch[i];
    const int32_t q_len = static_cast<int32_t>(s.tokens.size());
    h_seqs_.push_back({static_cast<int32_t>(h_token_ids_.size()), q_len, s.start_pos});
    h_context_lens_.push_back(s.start_pos + q_len);
    max_q_len_ = std::max(max_q_len_, q_len);
    max_context_len_ = std::max(max_context_len_, s.start_pos + q_len);
    const int32_t needed = (s.start_pos + q_len + block_size_ - 1) / block_size_;
    for (int32_t b = 0; b < needed; ++b) h_tables_[i * max_blocks_ + b] = s.block_table[b].value();
    for (int32_t j = 0; j < q_len; ++j) {
      const int32_t pos = s.start_pos + j;
      h_token_ids_.push_back(s.tokens[j]);
      h_positions_.push_back(pos);
      h_slots_.push_back(static_cast<int64_t>(s.block_table[pos / block_size_].value()) *
                             block_size_ + pos % block_size_);
    }
  }
  max_context_len_ = std::max(max_context_len_, padded_context);
  RETURN_IF_ERROR(token_ids_.UploadAll(h_token_ids_, stream));
  RETURN_IF_ERROR(positions_.UploadAll(h_positions_, stream));
  RETURN_IF_ERROR(slots_.UploadAll(h_slots_, stream));
  RETURN_IF_ERROR(seqs_.UploadAll(h_seqs_, stream));
  RETURN_IF_ERROR(tables_.UploadAll(h_tables_, stream));
  return context_lens_.UploadAll(h_context_lens_, stream);
}

}  // namespace tandem::device
