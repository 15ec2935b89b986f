// The emulated CUDA runtime: poisoned allocations, copy direction and bounds
// checks, the last-error protocol, streams and events, launch checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/emulation/device_memory.h"
#include "kernels/cuda/emulation/sanitizer_hooks.h"
#include "tests/unit/kernels/cuda/emulation/emulation_test_util.h"

namespace tandem::cuda_emu::testing {
namespace {

class RuntimeApiTest : public ::testing::Test {
 protected:
  void SetUp() override { cudaGetLastError(); }
};

TEST_F(RuntimeApiTest, MallocIsAlignedAndPoisoned) {
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::vector<float> host(1000);
  ASSERT_EQ(cudaMemcpy(host.data(), p, 1000 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float f : host) ASSERT_TRUE(std::isnan(f));
  int as_int = 0;
  std::memcpy(&as_int, host.data(), sizeof(int));
  EXPECT_EQ(as_int, -1);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(RuntimeApiTest, CopiesCheckDirectionAndBounds) {
  DeviceBuffer<int> device(16);
  std::vector<int> host(16, 1);
  const size_t bytes = 16 * sizeof(int);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  // Host pointer given as the device side, and the reverse.
  EXPECT_EQ(cudaMemcpy(host.data(), host.data(), bytes, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get(), device.get(), bytes, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  // One element past the allocation.
  EXPECT_EQ(cudaMemcpy(device.get() + 1, host.data(), bytes, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device.get(), host.data(), bytes, static_cast<cudaMemcpyKind>(9)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(host.data(), device.get(), bytes, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), device.get(), bytes, cudaMemcpyDeviceToHost, nullptr),
            cudaSuccess);
}

TEST_F(RuntimeApiTest, LastErrorIsKeptUntilRead) {
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(0x1000)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
}

TEST_F(RuntimeApiTest, MemsetAndMemGetInfo) {
  size_t free_before = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  DeviceBuffer<uint8_t> buffer(1 << 20);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, size_t{1} << 20);
  ASSERT_EQ(cudaMemset(buffer.get(), 0x5a, 1 << 20), cudaSuccess);
  for (uint8_t b : buffer.Download()) ASSERT_EQ(b, 0x5a);
  EXPECT_EQ(cudaMemset(buffer.get(), 0, (1 << 20) + 1), cudaErrorInvalidValue);
}

TEST_F(RuntimeApiTest, MallocBeyondCapacityFails) {
  DeviceMemory& memory = DeviceMemory::Get();
  const size_t capacity = memory.capacity_bytes();
  memory.SetCapacity(memory.used_bytes() + 4096);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 8192), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMalloc(&p, 4096), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // double free
  memory.SetCapacity(capacity);
}

TEST_F(RuntimeApiTest, StreamsAndEvents) {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // not recorded
  EXPECT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(end), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorInvalidResourceHandle);  // destroyed
  EXPECT_EQ(cudaEventDestroy(start), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
}

__global__ void FillKernel(int* out, int value) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

TEST_F(RuntimeApiTest, BadLaunchesRecordAnErrorAndRunNothing) {
  DeviceBuffer<int> out(std::vector<int>(64, 0));
  TANDEM_LAUNCH(FillKernel, 1, 2048, 0, nullptr, out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  TANDEM_LAUNCH(FillKernel, 1, dim3(8, 8, 128), 0, nullptr, out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  TANDEM_LAUNCH(FillKernel, 0, 64, 0, nullptr, out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  TANDEM_LAUNCH(FillKernel, 1, 64, 48 * 1024 + 1, nullptr, out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  TANDEM_LAUNCH(FillKernel, 1, 64, 0, reinterpret_cast<cudaStream_t>(0x10), out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(out.Download(), std::vector<int>(64, 0));
  TANDEM_LAUNCH(FillKernel, 2, 32, 0, nullptr, out.get(), 7);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Download(), std::vector<int>(64, 7));
}

__global__ void BigSharedKernel(unsigned* out, unsigned words) {
  TANDEM_DYNAMIC_SHARED(unsigned, data);
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) data[i] = i;
  __syncthreads();
  unsigned sum = 0;
  for (unsigned i = 0; i < words; ++i) sum += data[i];
  out[threadIdx.x] = sum;
}

TEST_F(RuntimeApiTest, FuncSetAttributeRaisesTheDynamicSharedLimit) {
  constexpr unsigned kWords = 100 * 1024 / 4;
  DeviceBuffer<unsigned> out(32);
  TANDEM_LAUNCH(BigSharedKernel, 1, 32, kWords * 4, nullptr, out.get(), kWords);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  ASSERT_EQ(cudaFuncSetAttribute(BigSharedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kWords * 4),
            cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(BigSharedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 228 * 1024),
            cudaErrorInvalidValue);
  cudaGetLastError();
  TANDEM_LAUNCH(BigSharedKernel, 1, 32, kWords * 4, nullptr, out.get(), kWords);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.Download(), std::vector<unsigned>(32, kWords * (kWords - 1) / 2));
}

__global__ void OverrunKernel(int* out, int n) { out[n + threadIdx.x] = 1; }

TEST(RuntimeApiDeathTest, KernelOverrunningAnAllocationIsCaughtUnderAsan) {
#ifndef TANDEM_CUDA_EMU_ASAN
  GTEST_SKIP() << "needs the ASan build (scripts/test-sanitizers.sh)";
#endif
  auto run = [] {
    int* out = nullptr;
    cudaMalloc(&out, 10 * sizeof(int));
    TANDEM_LAUNCH(OverrunKernel, 1, 32, 0, nullptr, out, 10);
  };
  EXPECT_DEATH(run(), "heap-buffer-overflow");
}

TEST(RuntimeApiDeathTest, IntrinsicOutsideAKernelAborts) {
  EXPECT_DEATH(__syncthreads(), "__syncthreads called outside a kernel");
}

}  // namespace
}  // namespace tandem::cuda_emu::testing
