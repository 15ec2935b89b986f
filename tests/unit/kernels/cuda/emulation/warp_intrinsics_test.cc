// Warp intrinsics under emulation, in several execution orders: the shuffle
// family with every width (against a reference written from the CUDA
// programming guide), votes with partial masks, __syncwarp, __activemask,
// partial warps, 8-byte and 16-bit shuffled types.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

constexpr unsigned kFull = 0xffffffffu;

__global__ void ShuffleAllKernel(int* out, int operand, int width) {
  const int t = threadIdx.x;
  const int v = 100 + t;
  out[4 * t + 0] = __shfl_sync(kFull, v, operand, width);
  out[4 * t + 1] = __shfl_up_sync(kFull, v, static_cast<unsigned>(operand), width);
  out[4 * t + 2] = __shfl_down_sync(kFull, v, static_cast<unsigned>(operand), width);
  out[4 * t + 3] = __shfl_xor_sync(kFull, v, operand, width);
}

// The CUDA programming guide's description, for 0 <= delta < 32.
std::vector<int> ExpectedShuffles(int num_threads, int operand, int width) {
  std::vector<int> expected(4 * num_threads);
  for (int t = 0; t < num_threads; ++t) {
    const int lane = t % 32;
    const int warp_base = t - lane;
    const int segment = lane / width * width;
    auto value = [&](int source_lane) { return 100 + warp_base + source_lane; };
    expected[4 * t + 0] = value(segment + (operand % width + width) % width);
    const int up = lane - operand;
    expected[4 * t + 1] = up >= segment ? value(up) : value(lane);
    const int down = lane + operand;
    expected[4 * t + 2] = down < segment + width ? value(down) : value(lane);
    const int butterfly = lane ^ operand;
    expected[4 * t + 3] = butterfly < segment + width ? value(butterfly) : value(lane);
  }
  return expected;
}

class WarpIntrinsicsTest : public OrderedTest {};

TEST_P(WarpIntrinsicsTest, ShufflesMatchCudaForEveryWidth) {
  constexpr int kThreads = 64;
  DeviceBuffer<int> out(4 * kThreads);
  for (int width : {1, 2, 4, 8, 16, 32}) {
    for (int operand : {0, 1, 2, 3, 5, 8, 13, 16, 31}) {
      TANDEM_LAUNCH(ShuffleAllKernel, 1, kThreads, 0, nullptr, out.get(), operand, width);
      ASSERT_EQ(out.Download(), ExpectedShuffles(kThreads, operand, width))
          << "width " << width << " operand " << operand;
    }
  }
}

__global__ void NegativeSourceLaneKernel(int* out) {
  out[threadIdx.x] = __shfl_sync(kFull, static_cast<int>(threadIdx.x), -1, 8);
}

TEST_P(WarpIntrinsicsTest, ShuffleSourceLaneWrapsModuloWidth) {
  DeviceBuffer<int> out(32);
  TANDEM_LAUNCH(NegativeSourceLaneKernel, 1, 32, 0, nullptr, out.get());
  std::vector<int> got = out.Download();
  for (int t = 0; t < 32; ++t) EXPECT_EQ(got[t], t / 8 * 8 + 7) << t;
}

// Lanes 0-15 shuffle among themselves while 16-31 run a different shuffle:
// two disjoint collectives in one warp. __shfl_down by 8 on lanes 8-15 reads
// lanes 16-23, outside the mask: undefined, all-ones bits here.
__global__ void PartialMaskShuffleKernel(int* out) {
  const int t = threadIdx.x;
  if (t < 16) {
    out[t] = __shfl_down_sync(0x0000ffffu, t, 8);
  } else {
    out[t] = __shfl_xor_sync(0xffff0000u, t, 1);
  }
}

TEST_P(WarpIntrinsicsTest, PartialMaskShuffleReadsOutsideMaskAsUndefined) {
  DeviceBuffer<int> out(32);
  TANDEM_LAUNCH(PartialMaskShuffleKernel, 1, 32, 0, nullptr, out.get());
  std::vector<int> got = out.Download();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(got[t], t + 8) << t;
  for (int t = 8; t < 16; ++t) EXPECT_EQ(got[t], -1) << t;
  for (int t = 16; t < 32; ++t) EXPECT_EQ(got[t], t ^ 1) << t;
}

__global__ void VoteKernel(unsigned* out, unsigned mask) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned group = (mask >> lane & 1u) ? mask : ~mask;
  const int predicate = lane % 3 == 0;
  out[3 * threadIdx.x + 0] = __ballot_sync(group, predicate);
  out[3 * threadIdx.x + 1] = static_cast<unsigned>(__any_sync(group, predicate));
  out[3 * threadIdx.x + 2] = static_cast<unsigned>(__all_sync(group, lane < 16));
}

TEST_P(WarpIntrinsicsTest, VotesCountOnlyTheirMask) {
  DeviceBuffer<unsigned> out(3 * 32);
  for (unsigned mask : {0x0f0f0f0fu, 0x0000ffffu, 0x00000001u, 0x80000000u}) {
    TANDEM_LAUNCH(VoteKernel, 1, 32, 0, nullptr, out.get(), mask);
    const std::vector<unsigned> got = out.Download();
    unsigned predicate_bits = 0;
    for (int lane = 0; lane < 32; lane += 3) predicate_bits |= 1u << lane;
    for (int lane = 0; lane < 32; ++lane) {
      const unsigned group = (mask >> lane & 1u) ? mask : ~mask;
      EXPECT_EQ(got[3 * lane + 0], predicate_bits & group) << "mask " << mask << " lane " << lane;
      EXPECT_EQ(got[3 * lane + 1], (predicate_bits & group) != 0) << lane;
      EXPECT_EQ(got[3 * lane + 2], (group & 0xffff0000u) == 0) << lane;
    }
  }
}

__global__ void SyncWarpExchangeKernel(int* out) {
  __shared__ int slots[64];
  const int t = threadIdx.x;
  slots[t] = 10 * t;
  __syncwarp();
  const int lane = t % 32;
  out[t] = slots[t - lane + (lane + 1) % 32];
}

TEST_P(WarpIntrinsicsTest, SyncWarpOrdersSharedMemoryWithinTheWarp) {
  DeviceBuffer<int> out(64);
  TANDEM_LAUNCH(SyncWarpExchangeKernel, 1, 64, 0, nullptr, out.get());
  std::vector<int> got = out.Download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], 10 * (t - t % 32 + (t % 32 + 1) % 32)) << t;
}

__global__ void ActiveMaskKernel(unsigned* out, int* sums) {
  const int t = threadIdx.x;
  if (t >= 16) return;
  const unsigned mask = __activemask();
  out[t] = mask;
  sums[t] = __shfl_xor_sync(mask, t, 1) + t;
}

TEST_P(WarpIntrinsicsTest, ActiveMaskLeavesOutExitedLanes) {
  DeviceBuffer<unsigned> masks(16);
  DeviceBuffer<int> sums(16);
  TANDEM_LAUNCH(ActiveMaskKernel, 1, 32, 0, nullptr, masks.get(), sums.get());
  const std::vector<unsigned> got = masks.Download();
  const std::vector<int> got_sums = sums.Download();
  for (int t = 0; t < 16; ++t) {
    EXPECT_EQ(got[t], 0x0000ffffu) << t;
    EXPECT_EQ(got_sums[t], t + (t ^ 1)) << t;
  }
}

// 48 threads: warp 1 has lanes 0-15 only. A full mask names lanes that do
// not exist; they are dropped, and reading them gives undefined bits.
__global__ void PartialWarpKernel(int* out) {
  const int t = threadIdx.x;
  out[2 * t + 0] = __shfl_xor_sync(kFull, t, 1);
  out[2 * t + 1] = __shfl_down_sync(kFull, t, 8);
}

TEST_P(WarpIntrinsicsTest, PartialLastWarpDropsMissingLanes) {
  DeviceBuffer<int> out(2 * 48);
  TANDEM_LAUNCH(PartialWarpKernel, 1, 48, 0, nullptr, out.get());
  const std::vector<int> got = out.Download();
  for (int t = 0; t < 48; ++t) {
    EXPECT_EQ(got[2 * t], t ^ 1) << t;
    const int lane = t % 32;
    const int expected_down = t < 32 ? (lane + 8 < 32 ? t + 8 : t) : (lane < 8 ? t + 8 : -1);
    EXPECT_EQ(got[2 * t + 1], expected_down) << t;
  }
}

__global__ void WideTypesKernel(double* doubles, unsigned long long* words, __half* halves) {
  const int t = threadIdx.x;
  doubles[t] = __shfl_sync(kFull, 0.1 * t, 31 - t);
  words[t] = __shfl_xor_sync(kFull, 0x0123456789abcdefull + t, 16);
  halves[t] = __shfl_up_sync(kFull, __float2half(0.5f * t), 1);
}

TEST_P(WarpIntrinsicsTest, ShufflesMoveWholeValuesOfEverySize) {
  DeviceBuffer<double> doubles(32);
  DeviceBuffer<unsigned long long> words(32);
  DeviceBuffer<__half> halves(32);
  TANDEM_LAUNCH(WideTypesKernel, 1, 32, 0, nullptr, doubles.get(), words.get(), halves.get());
  const std::vector<double> got_doubles = doubles.Download();
  const std::vector<unsigned long long> got_words = words.Download();
  const std::vector<__half> got_halves = halves.Download();
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(got_doubles[t], 0.1 * (31 - t)) << t;
    EXPECT_EQ(got_words[t], 0x0123456789abcdefull + (t ^ 16)) << t;
    EXPECT_EQ(__half2float(got_halves[t]), 0.5f * (t == 0 ? 0 : t - 1)) << t;
  }
}

__global__ void DivergentActiveMaskKernel(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  if (lane < 10) {
    out[threadIdx.x] = __activemask();
  } else {
    out[threadIdx.x] = __activemask();
  }
}

TEST_P(WarpIntrinsicsTest, ActiveMaskInDivergentBranchesIsTheBranch) {
  DeviceBuffer<unsigned> out(64);
  TANDEM_LAUNCH(DivergentActiveMaskKernel, 1, 64, 0, nullptr, out.get());
  const std::vector<unsigned> got = out.Download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], t % 32 < 10 ? 0x3ffu : ~0x3ffu) << t;
}

INSTANTIATE_TEST_SUITE_P(Orders, WarpIntrinsicsTest, ::testing::ValuesIn(TestOrders()),
                         OrderTestName);

}  // namespace
}  // namespace tandem::cuda_emu::testing
