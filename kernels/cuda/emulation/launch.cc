#include "kernels/cuda/emulation/launch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kernels/cuda/emulation/block_runner.h"
#include "kernels/cuda/emulation/device_memory.h"
#include "kernels/cuda/emulation/execution_order.h"
#include "kernels/cuda/emulation/launch_counting.h"
#include "kernels/cuda/emulation/runtime_api.h"

namespace tandem::cuda_emu {
namespace {

constexpr std::size_t kDefaultDynamicSharedBytes = 48 * 1024;
constexpr std::size_t kMaxDynamicSharedBytes = 227 * 1024;

struct KernelAttributes {
  std::mutex mutex;
  std::map<const void*, std::size_t> max_dynamic_shared ABSL_GUARDED_BY(mutex);

  std::size_t MaxDynamicShared(const void* kernel) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = max_dynamic_shared.find(kernel);
    return it == max_dynamic_shared.end() ? kDefaultDynamicSharedBytes : it->second;
  }
};

KernelAttributes& Attributes() {
  static KernelAttributes* attributes = new KernelAttributes();
  return *attributes;
}

bool ValidBlock(const dim3& b) {
  return b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
         uint64_t{b.x} * b.y * b.z <= 1024;
}

bool ValidGrid(const dim3& g) {
  return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu && g.y <= 65535 && g.z <= 65535;
}

cudaError_t CheckConfig(const LaunchConfig& c) {
  if (!ValidBlock(c.block) || !ValidGrid(c.grid)) return cudaErrorInvalidConfiguration;
  if (c.dynamic_shared_bytes > Attributes().MaxDynamicShared(c.kernel)) {
    return cudaErrorInvalidConfiguration;
  }
  if (!IsValidStream(c.stream)) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

// Linear block indices in the order the blocks run.
std::vector<uint64_t> BlockOrder(uint64_t num_blocks, const ExecutionOrder& order) {
  std::vector<uint64_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  if (order.kind == ExecutionOrder::Kind::kReverse) std::reverse(blocks.begin(), blocks.end());
  if (order.kind == ExecutionOrder::Kind::kRandom) {
    std::mt19937_64 rng(order.seed);
    for (uint64_t i = num_blocks; i > 1; --i) std::swap(blocks[i - 1], blocks[rng() % i]);
  }
  return blocks;
}

// The block's dynamic shared memory: a new allocation for every block, so
// that what one block left there never reaches the next, poisoned, 128-byte
// aligned.
struct DynamicShared {
  explicit DynamicShared(std::size_t bytes) {
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 127) / 128 * 128;
    data = static_cast<unsigned char*>(std::aligned_alloc(128, rounded));
    std::memset(data, kPoisonByte, rounded);
  }
  ~DynamicShared() { std::free(data); }
  unsigned char* data;
};

}  // namespace

cudaError_t SetMaxDynamicSharedBytes(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<std::size_t>(bytes) > kMaxDynamicSharedBytes) {
    return RecordError(cudaErrorInvalidValue);
  }
  KernelAttributes& attributes = Attributes();
  std::lock_guard<std::mutex> lock(attributes.mutex);
  attributes.max_dynamic_shared[kernel] = static_cast<std::size_t>(bytes);
  return cudaSuccess;
}

void LaunchKernel(const LaunchConfig& config, const std::function<void()>& kernel_body) {
  if (RecordError(CheckConfig(config)) != cudaSuccess) return;
  LaunchCounting counting(LaunchCountingInfo{config.kernel_name, config.grid, config.block,
                                             config.dynamic_shared_bytes, config.flops});
  const ExecutionOrder order = CurrentExecutionOrder();
  const dim3& g = config.grid;
  for (uint64_t linear : BlockOrder(uint64_t{g.x} * g.y * g.z, order)) {
    const uint3 block_idx{static_cast<unsigned>(linear % g.x),
                          static_cast<unsigned>(linear / g.x % g.y),
                          static_cast<unsigned>(linear / (uint64_t{g.x} * g.y))};
    DynamicShared shared(config.dynamic_shared_bytes);
    BlockRunner runner(
        BlockSpec{config.kernel_name, config.grid, config.block, block_idx, shared.data, order},
        kernel_body);
    counting.BeginBlock(linear, shared.data);
    runner.Run();
    counting.EndBlock();
  }
}

}  // namespace tandem::cuda_emu
