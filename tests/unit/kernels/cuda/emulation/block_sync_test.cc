// __syncthreads, shared memory and the built-in index variables under
// emulation, in several execution orders: barriers with threads that exited
// early, static shared memory per block, dynamic shared memory poisoned per
// block, 3-D grids.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

class BlockSyncTest : public OrderedTest {};

// Threads 40.. exit at once; the barrier waits for the 40 that remain.
__global__ void EarlyExitBarrierKernel(int* out) {
  __shared__ int values[64];
  const int t = threadIdx.x;
  if (t >= 40) return;
  values[t] = 3 * t;
  __syncthreads();
  out[t] = values[(t + 1) % 40];
}

TEST_P(BlockSyncTest, BarrierWaitsOnlyForThreadsNotExited) {
  DeviceBuffer<int> out(40);
  TANDEM_LAUNCH(EarlyExitBarrierKernel, 1, 64, 0, nullptr, out.get());
  const std::vector<int> got = out.Download();
  for (int t = 0; t < 40; ++t) EXPECT_EQ(got[t], 3 * ((t + 1) % 40)) << t;
}

// Thread i leaves in round i while the others keep meeting at the barrier.
__global__ void ExitInsideBarrierLoopKernel(int* rounds_seen) {
  __shared__ int round_counter[8];
  const int t = threadIdx.x;
  for (int round = 0; round < 8; ++round) {
    if (t == round) return;
    if (t == 7) round_counter[round] = round;
    __syncthreads();
    rounds_seen[8 * t + round] = round_counter[round];
    __syncthreads();
  }
}

TEST_P(BlockSyncTest, ThreadsMayExitBetweenBarriers) {
  DeviceBuffer<int> seen(std::vector<int>(64, -5));
  TANDEM_LAUNCH(ExitInsideBarrierLoopKernel, 1, 8, 0, nullptr, seen.get());
  const std::vector<int> got = seen.Download();
  for (int t = 0; t < 8; ++t) {
    for (int round = 0; round < 8; ++round) {
      EXPECT_EQ(got[8 * t + round], round < t ? round : -5) << t << " " << round;
    }
  }
}

__global__ void StaticSharedPerBlockKernel(int* out) {
  __shared__ int tile[128];
  const int t = threadIdx.x;
  tile[t] = 1000 * static_cast<int>(blockIdx.x) + t;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t];
}

TEST_P(BlockSyncTest, StaticSharedMemoryBelongsToItsBlock) {
  DeviceBuffer<int> out(4 * 128);
  TANDEM_LAUNCH(StaticSharedPerBlockKernel, 4, 128, 0, nullptr, out.get());
  const std::vector<int> got = out.Download();
  for (int b = 0; b < 4; ++b) {
    for (int t = 0; t < 128; ++t) EXPECT_EQ(got[b * 128 + t], 1000 * b + 127 - t);
  }
}

// Reads dynamic shared memory before writing it: every block must see the
// poison, not what the previous block left.
__global__ void DynamicSharedPoisonKernel(uint32_t* seen, float* seen_float) {
  TANDEM_DYNAMIC_SHARED(uint32_t, words);
  const unsigned t = threadIdx.x;
  seen[blockIdx.x * blockDim.x + t] = words[t];
  seen_float[blockIdx.x * blockDim.x + t] = reinterpret_cast<float*>(words)[t];
  __syncthreads();
  words[t] = t;
}

TEST_P(BlockSyncTest, DynamicSharedMemoryIsPoisonedForEveryBlock) {
  DeviceBuffer<uint32_t> seen(3 * 64);
  DeviceBuffer<float> seen_float(3 * 64);
  TANDEM_LAUNCH(DynamicSharedPoisonKernel, 3, 64, 64 * sizeof(uint32_t), nullptr, seen.get(),
                seen_float.get());
  for (uint32_t word : seen.Download()) EXPECT_EQ(word, 0xffffffffu);
  for (float f : seen_float.Download()) EXPECT_TRUE(std::isnan(f));
}

__global__ void IndexKernel(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  unsigned* mine = out + 4 * (block * threads_per_block + thread);
  mine[0] = block;
  mine[1] = thread;
  mine[2] = threadIdx.z * 100 + threadIdx.y * 10 + threadIdx.x;
  mine[3] = blockIdx.z * 100 + blockIdx.y * 10 + blockIdx.x;
}

TEST_P(BlockSyncTest, IndicesCoverA3dGrid) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 3, 2);
  const int total = 12 * 24;
  DeviceBuffer<unsigned> out(4 * total);
  TANDEM_LAUNCH(IndexKernel, grid, block, 0, nullptr, out.get());
  const std::vector<unsigned> got = out.Download();
  for (int i = 0; i < total; ++i) {
    const unsigned b = i / 24;
    const unsigned t = i % 24;
    EXPECT_EQ(got[4 * i + 0], b);
    EXPECT_EQ(got[4 * i + 1], t);
    EXPECT_EQ(got[4 * i + 2], t / 12 * 100 + t / 4 % 3 * 10 + t % 4);
    EXPECT_EQ(got[4 * i + 3], b / 6 * 100 + b / 3 % 2 * 10 + b % 3);
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, BlockSyncTest, ::testing::ValuesIn(TestOrders()), OrderTestName);

}  // namespace
}  // namespace tandem::cuda_emu::testing
