#include "engine/device/model_runner_factory.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/device/cuda_model_runner.h"
#include "engine/model/cpu_model_runner.h"
#include "engine/model/kv_budget.h"

namespace tandem::device {

RunnerOptions RunnerOptionsFor(const DeviceChoice& device, int32_t block_size, int32_t kv_blocks,
                               int64_t kv_cache_bytes) {
  RunnerOptions options;
  options.device = device.device;
  options.cuda = device.cuda;
  options.block_size = block_size;
  options.kv_blocks = kv_blocks;
  options.kv_cache_bytes = kv_cache_bytes;
  return options;
}

absl::StatusOr<LoadedRunner> MakeModelRunner(model::Model* model, const RunnerOptions& options) {
  LoadedRunner loaded;
  if (options.device == Device::kCpu) {
    loaded.runner = std::make_unique<model::CpuModelRunner>(model);
    ASSIGN_OR_RETURN(loaded.num_blocks,
                     model::NumKvBlocks(*model, options.block_size, options.kv_blocks,
                                        options.kv_cache_bytes));
    return loaded;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CudaModelRunner> cuda,
                   CudaModelRunner::Create(model, options.cuda));
  if (options.kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--kv-blocks %d is negative: must be >= 1 (or 0 to size the cache from "
        "--gpu-memory-fraction)", options.kv_blocks));
  }
  if (options.kv_blocks > 0) {
    loaded.num_blocks = options.kv_blocks;
  } else {
    ASSIGN_OR_RETURN(loaded.num_blocks,
                     cuda->NumKvBlocksForMemoryFraction(options.cuda.gpu_memory_fraction,
                                                        options.block_size));
  }
  loaded.runner = std::move(cuda);
  return loaded;
}

}  // namespace tandem::device
