#include "engine/model/cpu_model_runner.h"

#include "common/status_macros.h"

namespace tandem::model {
namespace {
absl::Status NoCache() {
  return absl::FailedPreconditionError("the model runner has no KV cache (a reset failed)");
}
}  // namespace

absl::Status CpuModelRunner::ResetKvCache(int32_t num_blocks, int32_t block_size) {
  storage_.reset();  // release the old pages before mapping new ones
  kv::KvStorageConfig config;
  config.num_layers = model_->config().num_layers;
  config.num_blocks = num_blocks;
  config.block_size = block_size;
  config.num_kv_heads = model_->num_local_kv_heads();  // this rank's shard
  config.head_dim = model_->config().head_dim;
  config.dtype = model_->kv_dtype();
  ASSIGN_OR_RETURN(storage_, kv::KvStorage::Create(config));
  return absl::OkStatus();
}

absl::Status CpuModelRunner::CopyBlocks(std::span<const kv::BlockCopy> copies) {
  if (storage_ == nullptr) return NoCache();
  storage_->CopyBlocks(copies);
  return absl::OkStatus();
}

absl::Status CpuModelRunner::Forward(std::span<const ForwardSequence> batch, float* logits) {
  if (storage_ == nullptr) return NoCache();
  return model_->Forward(batch, *storage_, logits);
}

}  // namespace tandem::model
