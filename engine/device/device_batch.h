// DeviceBatch: a forward batch's per-token and per-sequence metadata (token
// ids, positions, KV slots, attention sequences, block tables, context
// lengths) built on the host and copied into device buffers allocated once
// for the largest batch, so that a step allocates no device memory.
//
// Thread-safety: one Upload at a time; the buffers are read by kernels on
// the stream passed to Upload.
#ifndef TANDEM_ENGINE_DEVICE_DEVICE_BATCH_H_
#define TANDEM_ENGINE_DEVICE_DEVICE_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "kernels/cuda/attention/paged_attention_prefill.cuh"
#include "kernels/cuda/runtime/device_buffer.h"

namespace tandem::device {

class DeviceBatch {
 public:
  // Buffers for batches of up to `max_tokens` tokens (and as many
  // sequences) with up to `max_blocks_per_seq` blocks of `block_size` each.
  static absl::StatusOr<DeviceBatch> Create(int32_t max_tokens, int32_t max_blocks_per_seq,
                                            int32_t block_size);

  // Fills the buffers for `batch` (validated by Model::ValidateBatch) on
  // `stream`. InvalidArgument naming the limit when the batch has more
  // tokens or needs more blocks per sequence than the buffers hold.
  // `pad_context_to` > 0 (a decode graph's shape, decode_graphs.h) reports
  // max_context_len() as that (clamped to the tables' capacity; at least
  // the batch's own) and lays the block tables out for it, so that every
  // batch of the shape passes the kernels the same values.
  absl::Status Upload(std::span<const model::ForwardSequence> batch, cudaStream_t stream,
                      int32_t pad_context_to = 0);

  int32_t num_tokens() const { return num_tokens_; }
  int32_t num_seqs() const { return num_seqs_; }
  // Whether every sequence computes one token (the decode attention kernel).
  bool all_decode() const { return max_q_len_ == 1; }
  int32_t max_q_len() const { return max_q_len_; }
  int32_t max_context_len() const { return max_context_len_; }
  int32_t max_blocks_per_seq() const { return max_blocks_; }
  int32_t max_tokens() const { return max_tokens_; }
  // The longest context the block tables can hold.
  int32_t context_capacity() const { return max_blocks_capacity_ * block_size_; }

  const int32_t* token_ids() const { return token_ids_.as<int32_t>(); }    // [num_tokens]
  const int32_t* positions() const { return positions_.as<int32_t>(); }    // [num_tokens]
  const int64_t* slots() const { return slots_.as<int64_t>(); }            // [num_tokens]
  const cuda::PagedAttentionSeq* seqs() const { return seqs_.as<cuda::PagedAttentionSeq>(); }
  const int32_t* block_tables() const { return tables_.as<int32_t>(); }    // [num_seqs, max_blocks]
  const int32_t* context_lens() const { return context_lens_.as<int32_t>(); }  // [num_seqs]

 private:
  int32_t max_tokens_ = 0;
  int32_t max_blocks_capacity_ = 0;
  int32_t block_size_ = 0;
  int32_t num_tokens_ = 0;
  int32_t num_seqs_ = 0;
  int32_t max_q_len_ = 0;
  int32_t max_context_len_ = 0;
  int32_t max_blocks_ = 0;
  cuda::DeviceBuffer token_ids_, positions_, slots_, seqs_, tables_, context_lens_;
  // Host staging, reused.
  std::vector<int32_t> h_token_ids_, h_positions_, h_tables_, h_context_lens_;
  std::vector<int64_t> h_slots_;
  std::vector<cuda::PagedAttentionSeq> h_seqs_;
};

}  // namespace tandem::device

#endif  // TANDEM_ENGINE_DEVICE_DEVICE_BATCH_H_
