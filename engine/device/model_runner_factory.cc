#include "engine/device/model_runner_factory.h"

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/device/cuda_model_runner.h"
#include "engine/model/cpu_model_runner.h"
#include "engine/model/kv_budget.h"

namespace tandem::device {
namespace {

// The smallest of the ranks' `blocks` (0 from a rank whose own sizing
// failed), a collective over `comm`: every rank must allocate the same
// number of KV blocks, and uneven shards or other processes on a device
// leave different room on each.
absl::StatusOr<int32_t> FewestBlocksOverRanks(parallel::Communicator& comm, int32_t blocks) {
  int32_t fewest = blocks;
  for (int root = 0; root < comm.world_size(); ++root) {
    std::string bytes = root == comm.rank() ? std::to_string(blocks) : "";
    RETURN_IF_ERROR(comm.Broadcast(&bytes, root));
    int32_t theirs = 0;
    if (!absl::SimpleAtoi(bytes, &theirs)) {
      return absl::InternalError(absl::StrFormat("rank %d sent KV block count '%s'", root, bytes));
    }
    fewest = std::min(fewest, theirs);
  }
  return fewest;
}

// KV blocks for the device: --kv-blocks, else what --gpu-memory-fraction
// leaves, the same on every rank of a group.
absl::StatusOr<int32_t> DeviceKvBlocks(model::Model& model, CudaModelRunner& runner,
                                       const RunnerOptions& options) {
  if (options.kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--kv-blocks %d is negative: must be >= 1 (or 0 to size the cache from "
        "--gpu-memory-fraction)", options.kv_blocks));
  }
  if (options.kv_blocks > 0) return options.kv_blocks;
  absl::StatusOr<int32_t> blocks =
      runner.NumKvBlocksForMemoryFraction(options.cuda.gpu_memory_fraction, options.block_size);
  parallel::Communicator* comm = model.communicator();
  if (comm == nullptr || comm->world_size() == 1) return blocks;
  ASSIGN_OR_RETURN(const int32_t fewest,
                   FewestBlocksOverRanks(*comm, blocks.ok() ? *blocks : 0));
  if (!blocks.ok()) return blocks.status();
  if (fewest < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "another rank of the group has no device memory left for one KV block of %d tokens "
        "(--gpu-memory-fraction %g)", options.block_size, options.cuda.gpu_memory_fraction));
  }
  return fewest;
}

}  // namespace

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
  ASSIGN_OR_RETURN(loaded.num_blocks, DeviceKvBlocks(*model, *cuda, options));
  loaded.runner = std::move(cuda);
  return loaded;
}

}  // namespace tandem::device
