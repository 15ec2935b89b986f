// The emulator's counters (kernels/cuda/emulation/counters.h) on kernels of
// known access patterns (counter_kernels.cc, compiled with the access
// instrumentation) and on runtime calls of known kinds: every count exact.
#include "kernels/cuda/emulation/counters.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime/cuda_compat.cuh"
#include "tests/unit/kernels/cuda/emulation/counter_kernels.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

constexpr int kWidth4 = 2;   // MemoryCounters::requests_by_width index of 4-byte accesses
constexpr int kWidth8 = 3;
constexpr int kWidth16 = 4;

class CountersTest : public ::testing::Test {
 protected:
  void SetUp() override { EnableCounters(); }
  void TearDown() override { DisableCounters(); }

  static KernelCounters Kernel(const char* name) {
    const CounterSnapshot snapshot = ReadCounters();
    const KernelCounters* k = snapshot.Kernel(name);
    EXPECT_NE(k, nullptr) << name << " was not counted";
    return k == nullptr ? KernelCounters{} : *k;
  }
};

TEST_F(CountersTest, InstrumentedCodeIsLinked) { EXPECT_TRUE(AccessCountingLinked()); }

// Lane i loads in[i × stride]: 128 requested bytes over 4, 8 or 32 sectors.
TEST_F(CountersTest, CoalescingOfStridedLoads) {
  DeviceBuffer<float> in(kCounterLanes * kCounterLanes);
  DeviceBuffer<float> out(kCounterLanes);
  for (const auto& [stride, sectors] : {std::pair{1, 4}, {2, 8}, {32, 32}}) {
    SCOPED_TRACE(stride);
    ResetCounters();
    LaunchStridedCopy(in.get(), out.get(), stride, 1);
    const KernelCounters k = Kernel("StridedCopyKernel");
    EXPECT_EQ(k.launches, 1);
    EXPECT_EQ(k.blocks, 1);
    EXPECT_EQ(k.sampled_blocks, 1);
    EXPECT_EQ(k.threads, kCounterLanes);
    EXPECT_EQ(k.global_loads.requests, 1);
    EXPECT_EQ(k.global_loads.lane_accesses, kCounterLanes);
    EXPECT_EQ(k.global_loads.bytes, 128);
    EXPECT_EQ(k.global_loads.unique_bytes, 128);
    EXPECT_EQ(k.global_loads.sectors, sectors);
    EXPECT_DOUBLE_EQ(k.global_loads.Coalescing(), 4.0 / sectors);
    EXPECT_EQ(k.global_loads.requests_by_width[kWidth4], 1);
    EXPECT_EQ(k.global_stores.requests, 1);
    EXPECT_EQ(k.global_stores.sectors, 4);
    EXPECT_DOUBLE_EQ(k.global_stores.Coalescing(), 1.0);
    EXPECT_EQ(k.dram_bytes, (sectors + 4) * 32);
    EXPECT_EQ(k.shared_loads.requests + k.shared_stores.requests, 0);
  }
}

TEST_F(CountersTest, EightAndSixteenByteAccesses) {
  DeviceBuffer<uint64_t> in8(kCounterLanes), out8(kCounterLanes);
  LaunchCopy8(in8.get(), out8.get());
  const KernelCounters k8 = Kernel("Copy8Kernel");
  EXPECT_EQ(k8.global_loads.requests, 1);
  EXPECT_EQ(k8.global_loads.requests_by_width[kWidth8], 1);
  EXPECT_EQ(k8.global_loads.bytes, 256);
  EXPECT_EQ(k8.global_loads.sectors, 8);
  EXPECT_EQ(k8.global_stores.requests_by_width[kWidth8], 1);

  DeviceBuffer<uint64_t> in16(2 * kCounterLanes), out16(2 * kCounterLanes);
  LaunchCopy16(in16.get(), out16.get());
  const KernelCounters k16 = Kernel("Copy16Kernel");
  EXPECT_EQ(k16.global_loads.requests, 1);
  EXPECT_EQ(k16.global_loads.requests_by_width[kWidth16], 1);
  EXPECT_EQ(k16.global_loads.bytes, 512);
  EXPECT_EQ(k16.global_loads.sectors, 16);
  EXPECT_DOUBLE_EQ(k16.global_loads.Coalescing(), 1.0);
  EXPECT_EQ(k16.global_stores.requests_by_width[kWidth16], 1);
}

// Lane i touches word i × stride, in dynamic and in static shared memory:
// stride 1 is conflict-free, 2 puts two words in each used bank, 32 puts
// all 32 in bank 0.
TEST_F(CountersTest, SharedMemoryBankConflicts) {
  DeviceBuffer<float> out(kCounterLanes);
  for (const int stride : {1, 2, 32}) {
    SCOPED_TRACE(stride);
    ResetCounters();
    LaunchSharedStride(stride, out.get());
    const KernelCounters k = Kernel("SharedStrideKernel");
    for (const MemoryCounters* c : {&k.shared_stores, &k.shared_loads}) {
      EXPECT_EQ(c->requests, 2);  // dynamic and static
      EXPECT_EQ(c->lane_accesses, 2 * kCounterLanes);
      EXPECT_EQ(c->bytes, 2 * 128);
      EXPECT_EQ(c->phases, 2);
      EXPECT_EQ(c->wavefronts, 2 * stride);
      EXPECT_EQ(c->BankConflicts(), 2 * (stride - 1));
    }
    EXPECT_EQ(k.global_stores.requests, 1);
    EXPECT_EQ(k.global_loads.requests, 0);
  }
}

TEST_F(CountersTest, SharedBroadcastHasNoConflict) {
  DeviceBuffer<float> out(kCounterLanes);
  LaunchSharedBroadcast(out.get());
  const KernelCounters k = Kernel("SharedBroadcastKernel");
  EXPECT_EQ(k.shared_stores.requests, 1);
  EXPECT_EQ(k.shared_stores.lane_accesses, 1);
  EXPECT_EQ(k.shared_loads.requests, 1);
  EXPECT_EQ(k.shared_loads.lane_accesses, kCounterLanes);
  EXPECT_EQ(k.shared_loads.wavefronts, 1);
  EXPECT_EQ(k.shared_loads.BankConflicts(), 0);
  EXPECT_EQ(k.shared_loads.bytes, 4 * kCounterLanes);
  EXPECT_EQ(k.shared_loads.unique_bytes, 4);  // one word for every lane
}

TEST_F(CountersTest, AtomicsAreCountedApart) {
  DeviceBuffer<int> counter(1);
  ASSERT_EQ(cudaMemset(counter.get(), 0, sizeof(int)), cudaSuccess);
  LaunchAtomicAdds(counter.get());
  const KernelCounters k = Kernel("AtomicAddKernel");
  EXPECT_EQ(k.global_atomics, kCounterLanes);
  EXPECT_EQ(k.global_loads.requests + k.global_stores.requests, 0);
  EXPECT_EQ(counter.Download(), std::vector<int>{kCounterLanes});
}

TEST_F(CountersTest, SampledBlocksAreScaled) {
  EnableCounters({.block_stride = 4});
  DeviceBuffer<float> in(8 * kCounterLanes), out(8 * kCounterLanes);
  LaunchStridedCopy(in.get(), out.get(), 1, 8);
  const KernelCounters k = Kernel("StridedCopyKernel");
  EXPECT_EQ(k.blocks, 8);
  EXPECT_EQ(k.sampled_blocks, 2);  // blocks 0 and 4
  EXPECT_DOUBLE_EQ(k.AccessScale(), 4.0);
  EXPECT_EQ(k.global_loads.requests, 2);
  EXPECT_EQ(k.global_loads.bytes, 256);
  EXPECT_EQ(k.threads, 8 * kCounterLanes);
}

constexpr int kH2d = static_cast<int>(CopyDirection::kHostToDevice);
constexpr int kD2h = static_cast<int>(CopyDirection::kDeviceToHost);
constexpr int kD2d = static_cast<int>(CopyDirection::kDeviceToDevice);

TEST_F(CountersTest, CopiesAndSyncs) {
  DeviceBuffer<float> device(1024), device2(1024);
  std::vector<float> host(1024, 1.0f);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ResetCounters();
  ASSERT_EQ(cudaMemcpy(device.get(), host.data(), 4096, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device.get(), 4096, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device2.get(), 0, 4096, stream), cudaSuccess);
  const RuntimeCounters r = ReadCounters().runtime;
  EXPECT_EQ(r.copies[kH2d][0].count, 1);  // pageable
  EXPECT_EQ(r.copies[kH2d][0].bytes, 4096);
  EXPECT_EQ(r.copies[kH2d][1].count, 0);
  EXPECT_EQ(r.copies[kD2h][1].count, 1);  // pinned
  EXPECT_EQ(r.copies[kD2h][1].bytes, 4096);
  EXPECT_EQ(r.host_syncs, 2);  // the blocking cudaMemcpy and the stream's
  EXPECT_EQ(r.memsets.count, 1);
  EXPECT_EQ(r.memsets.bytes, 4096);
  cudaStreamDestroy(stream);
  cudaFreeHost(pinned);
}

// A graph of a launch and a copy, launched twice: replays count as graph
// nodes, not as direct launches or host syncs; the launch keeps its FLOPs.
TEST_F(CountersTest, Graphs) {
  DeviceBuffer<float> device(1024), device2(1024);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ResetCounters();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  LaunchWithFlops(1234, device.get(), stream);
  ASSERT_EQ(cudaMemcpyAsync(device2.get(), device.get(), 4096, cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(ReadCounters().kernels.size(), 0u);  // captured, not run
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  const CounterSnapshot after = ReadCounters();
  EXPECT_EQ(after.runtime.graph_launches, 2);
  EXPECT_EQ(after.runtime.graph_nodes, 4);
  EXPECT_EQ(after.runtime.kernel_launches, 0);
  EXPECT_EQ(after.runtime.host_syncs, 0);
  EXPECT_EQ(after.runtime.copies[kD2d][0].count, 2);
  EXPECT_EQ(after.runtime.copies[kD2d][0].bytes, 8192);
  const KernelCounters* k = after.Kernel("FlopsKernel");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->launches, 2);
  EXPECT_DOUBLE_EQ(k->flops, 2 * 1234.0);
  // A direct launch counts as one, with its own declaration.
  ResetCounters();
  LaunchWithFlops(10, device.get(), stream);
  EXPECT_EQ(ReadCounters().runtime.kernel_launches, 1);
  EXPECT_DOUBLE_EQ(Kernel("FlopsKernel").flops, 10.0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_F(CountersTest, NothingIsCountedWhenDisabled) {
  DisableCounters();
  ResetCounters();
  DeviceBuffer<float> in(kCounterLanes), out(kCounterLanes);
  LaunchStridedCopy(in.get(), out.get(), 1, 1);
  const CounterSnapshot snapshot = ReadCounters();
  EXPECT_TRUE(snapshot.kernels.empty());
  EXPECT_EQ(snapshot.runtime.host_syncs, 0);
}

}  // namespace
}  // namespace tandem::cuda_emu::testing
