#include "engine/device/cuda_model_runner.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda/attention/kv_cache.cuh"
#include "kernels/cuda/attention/paged_attention_decode.cuh"
#include "kernels/cuda/gemm/gemv.cuh"
#include "kernels/cuda/layers/embedding.cuh"
#include "kernels/cuda/layers/rms_norm.cuh"
#include "kernels/cuda/layers/rope.cuh"
#include "kernels/cuda/layers/silu_mul.cuh"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::device {

absl::Status NoCacheError() {
  return absl::FailedPreconditionError("the CUDA model runner has no KV cache (a reset failed)");
}

namespace {

using cuda::DeviceBuffer;

// Rows of logits computed and copied to the host at once.
constexpr int32_t kMaxLogitsRows = 64;

int64_t KvDtypeBytes(kernels::KvDtype dtype) {
  return dtype == kernels::KvDtype::kF32 ? 4 : 2;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    model::Model* model, const CudaOptions& options) {
  // Model::Load gives a sharded model its communicator.
  const parallel::TpShard& shard = model->shard();
  std::unique_ptr<CudaModelRunner> runner;
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(runner, CreateOnDevice(model, options));
    return absl::OkStatus();
  }();
  if (shard.world_size > 1) {
    // All ranks set up before any joins the device communicator.
    RETURN_IF_ERROR(parallel::AllRanksOk(
        *model->communicator(), status,
        absl::UnavailableError(absl::StrFormat(
            "another rank of the tensor-parallel group failed to set up its device (rank %d of "
            "%d is fine); see that rank's error",
            shard.rank, shard.world_size))));
    ASSIGN_OR_RETURN(runner->comm_, DeviceCommunicator::Create(model->communicator()));
    runner->graphs_.set_collective(true);
  }
  RETURN_IF_ERROR(status);
  return runner;
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::CreateOnDevice(
    model::Model* model, const CudaOptions& options) {
  RETURN_IF_ERROR(ValidateCudaOptions(options));
  int device_count = 0;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount"));
  ASSIGN_OR_RETURN(const int ordinal,
                   DeviceOrdinalFor(options.gpus, LocalRank(model->shard().rank), device_count));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamCreate(&stream), "cudaStreamCreate"));
  std::unique_ptr<CudaModelRunner> runner(new CudaModelRunner(model, options, stream));
  runner->device_ordinal_ = ordinal;
  ASSIGN_OR_RETURN(runner->weights_, UploadWeights(model->weights(), options.weights, stream));
  RETURN_IF_ERROR(runner->AllocateScratch());
  return runner;
}

CudaModelRunner::CudaModelRunner(model::Model* model, const CudaOptions& options,
                                 cudaStream_t stream)
    : model_(model), options_(options), stream_(stream) {
  const model::ModelConfig& c = model->config();
  q_dim_ = static_cast<int64_t>(model->shard().num_q_heads()) * c.head_dim;
  kv_dim_ = static_cast<int64_t>(model->shard().num_kv_heads()) * c.head_dim;
  ffn_ = model->shard().ffn_size();
  logits_rows_ = std::min(kMaxLogitsRows, options.max_batched_tokens);
}

CudaModelRunner::~CudaModelRunner() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

const char* CudaModelRunner::device_name() const {
#ifdef TANDEM_CUDA_EMULATION
  return "cuda (emulated on the CPU)";
#else
  return "cuda";
#endif
}

absl::Status CudaModelRunner::AllocateScratch() {
  const model::ModelConfig& c = model_->config();
  const int64_t t = options_.max_batched_tokens;
  const int64_t f = sizeof(float);
  const std::pair<DeviceBuffer*, int64_t> buffers[] = {
      {&x_, t * c.hidden_dim}, {&h_, t * c.hidden_dim}, {&q_, t * q_dim_},
      {&k_, t * kv_dim_},      {&v_, t * kv_dim_},      {&attn_, t * q_dim_},
      {&gate_, t * ffn_},      {&up_, t * ffn_},        {&out_, t * c.hidden_dim},
      {&logits_, int64_t{logits_rows_} * c.vocab_size}};
  for (const auto& [buffer, elements] : buffers) {
    ASSIGN_OR_RETURN(*buffer, DeviceBuffer::Allocate(elements * f, "forward scratch"));
  }
  // Split-K partials for t sequences over the whole context
  // (PagedAttentionDecodeWorkspaceBytes at its largest).
  const int64_t partitions =
      (c.context_length + cuda::kDefaultDecodePartitionSize - 1) / cuda::kDefaultDecodePartitionSize;
  ASSIGN_OR_RETURN(decode_workspace_,
                   DeviceBuffer::Allocate(t * model_->shard().num_q_heads() * partitions *
                                              (c.head_dim + 2) * f,
                                          "decode attention workspace"));
  ASSIGN_OR_RETURN(copy_src_, DeviceBuffer::Allocate(kMaxCopiesPerLaunch * 4, "block copies"));
  ASSIGN_OR_RETURN(copy_dst_, DeviceBuffer::Allocate(kMaxCopiesPerLaunch * 4, "block copies"));
  cuda::GemmLimits limits;
  limits.max_rows = t;
  limits.max_cols = std::max({static_cast<int64_t>(c.hidden_dim), q_dim_, ffn_});
  limits.max_weight_elements = weights_.max_quantized_layer_elements;
  ASSIGN_OR_RETURN(gemm_, cuda::Gemm::Create(limits, stream_, model_->pool()));
  // Only rank 0 samples (tensor-parallel followers compute no head). A
  // chunk's rows hold at most a context's worth of history each.
  if (options_.sample_on_device && model_->shard().rank == 0) {
    ASSIGN_OR_RETURN(sampler_,
                     DeviceSampler::Create(logits_rows_, c.vocab_size,
                                           int64_t{logits_rows_} * std::max(1, c.context_length)));
  }
  return absl::OkStatus();
}

int64_t CudaModelRunner::KvBytesPerBlock(int32_t block_size) const {
  const model::ModelConfig& c = model_->config();
  return 2 * int64_t{c.num_layers} * block_size * kv_dim_ * KvDtypeBytes(model_->kv_dtype());
}

absl::StatusOr<int32_t> CudaModelRunner::NumKvBlocksForMemoryFraction(double fraction,
                                                                      int32_t block_size) const {
  ASSIGN_OR_RETURN(cuda::DeviceMemoryInfo info, cuda::QueryDeviceMemory());
  const int64_t used = info.total_bytes - info.free_bytes;
  const int64_t budget = static_cast<int64_t>(fraction * static_cast<double>(info.total_bytes)) - used;
  const int64_t per_block = KvBytesPerBlock(block_size);
  const int64_t blocks = budget > 0 ? budget / per_block : 0;
  if (blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "--gpu-memory-fraction %g of %d device bytes leaves %d bytes for the KV cache after %d "
        "in use (weights and scratch); one block of %d tokens needs %d",
        fraction, info.total_bytes, budget, used, block_size, per_block));
  }
  return static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX));
}

absl::Status CudaModelRunner::SelectDevice() const {
  return cuda::CudaStatus(cudaSetDevice(device_ordinal_), "cudaSetDevice");
}

absl::Status CudaModelRunner::ResetKvCache(int32_t num_blocks, int32_t block_size) {
  RETURN_IF_ERROR(SelectDevice());
  graphs_.Clear();  // they hold the old cache's and batch buffers' addresses
  kv_ = DeviceBuffer();  // release the old cache before allocating the new one
  batch_.reset();
  num_blocks_ = 0;
  if (num_blocks < 1 || block_size < 1 || block_size > 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache of %d blocks of %d tokens: needs >= 1 block of [1, 1024] tokens", num_blocks,
        block_size));
  }
  const int64_t plane_elements = int64_t{num_blocks} * block_size * kv_dim_;
  // Planes start 256-byte aligned, as device allocations do.
  kv_plane_bytes_ = (plane_elements * KvDtypeBytes(model_->kv_dtype()) + 255) / 256 * 256;
  ASSIGN_OR_RETURN(kv_, DeviceBuffer::Allocate(2 * model_->config().num_layers * kv_plane_bytes_,
                                               "the KV cache"));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMemsetAsync(kv_.data(), 0, kv_.bytes(), stream_),
                                   "zeroing the KV cache"));
  const int32_t max_blocks_per_seq =
      (model_->config().context_length + block_size - 1) / block_size;
  ASSIGN_OR_RETURN(DeviceBatch batch, DeviceBatch::Create(options_.max_batched_tokens,
                                                          max_blocks_per_seq, block_size));
  batch_.emplace(std::move(batch));
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  return cuda::CudaStatus(cudaStreamSynchronize(stream_), "KV cache reset");
}

void* CudaModelRunner::KvPlane(int32_t layer, int plane) const {
  return static_cast<char*>(kv_.data()) + (2 * int64_t{layer} + plane) * kv_plane_bytes_;
}

kernels::PagedKvView CudaModelRunner::LayerView(int32_t layer) const {
  return kernels::PagedKvView{KvPlane(layer, 0), KvPlane(layer, 1), model_->kv_dtype(),
                              num_blocks_, block_size_, model_->num_local_kv_heads(),
                              model_->config().head_dim};
}

cuda::PagedKvCache CudaModelRunner::LayerCache(int32_t layer) const {
  const auto dtype = model_->kv_dtype() == kernels::KvDtype::kF32 ? cuda::KvCacheDtype::kF32
                                                                  : cuda::KvCacheDtype::kF16;
  return cuda::PagedKvCache{KvPlane(layer, 0), KvPlane(layer, 1), dtype, num_blocks_,
                            block_size_, model_->num_local_kv_heads(),
                            model_->config().head_dim};
}

}  // namespace tandem::device
