// Compiled with the access instrumentation (tests/unit/kernels/cuda/emulation
// /CMakeLists.txt): the emulator counts these kernels' loads and stores.
#include "tests/unit/kernels/cuda/emulation/counter_kernels.h"

#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda_emu::testing {
namespace {

__global__ void StridedCopyKernel(const float* in, float* out, int stride) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  out[i] = in[i * stride];
}

__global__ void Copy8Kernel(const uint64_t* in, uint64_t* out) {
  out[threadIdx.x] = in[threadIdx.x];
}

__global__ void Copy16Kernel(const uint4* in, uint4* out) { out[threadIdx.x] = in[threadIdx.x]; }

// Reads a neighbour's word after the barrier (the same addresses, so the
// same banks, as the writes), which the compiler cannot forward from the
// thread's own store.
__global__ void SharedStrideKernel(int stride, float* out) {
  TANDEM_DYNAMIC_SHARED(float, dynamic);
  __shared__ float tile[kCounterLanes * kCounterLanes];
  const int lane = static_cast<int>(threadIdx.x);
  dynamic[lane * stride] = static_cast<float>(lane);
  tile[lane * stride] = static_cast<float>(2 * lane);
  __syncthreads();
  const int next = (lane + 1) % kCounterLanes;
  out[lane] = dynamic[next * stride] + tile[next * stride];
}

__global__ void SharedBroadcastKernel(float* out) {
  TANDEM_DYNAMIC_SHARED(float, dynamic);
  if (threadIdx.x == 0) dynamic[0] = 3.0f;
  __syncthreads();
  out[threadIdx.x] = dynamic[0];
}

__global__ void FlopsKernel(float* out) { out[threadIdx.x] = 1.0f; }

__global__ void AtomicAddKernel(int* counter) { atomicAdd(counter, 1); }

}  // namespace

void LaunchStridedCopy(const float* in, float* out, int stride, int blocks) {
  TANDEM_LAUNCH(StridedCopyKernel, blocks, kCounterLanes, 0, nullptr, in, out, stride);
}

void LaunchCopy8(const uint64_t* in, uint64_t* out) {
  TANDEM_LAUNCH(Copy8Kernel, 1, kCounterLanes, 0, nullptr, in, out);
}

void LaunchCopy16(const void* in, void* out) {
  TANDEM_LAUNCH(Copy16Kernel, 1, kCounterLanes, 0, nullptr, static_cast<const uint4*>(in),
                static_cast<uint4*>(out));
}

void LaunchSharedStride(int stride, float* out) {
  const std::size_t shared_bytes = sizeof(float) * kCounterLanes * kCounterLanes;
  TANDEM_LAUNCH(SharedStrideKernel, 1, kCounterLanes, shared_bytes, nullptr, stride, out);
}

void LaunchSharedBroadcast(float* out) {
  TANDEM_LAUNCH(SharedBroadcastKernel, 1, kCounterLanes, sizeof(float), nullptr, out);
}

void LaunchWithFlops(double flops, float* out, cudaStream_t stream) {
  TANDEM_LAUNCH_FLOPS(flops);
  TANDEM_LAUNCH(FlopsKernel, 1, kCounterLanes, 0, stream, out);
}

void LaunchAtomicAdds(int* counter) {
  TANDEM_LAUNCH(AtomicAddKernel, 1, kCounterLanes, 0, nullptr, counter);
}

}  // namespace tandem::cuda_emu::testing
