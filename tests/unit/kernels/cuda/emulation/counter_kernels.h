// Kernels with known memory-access patterns for the emulator's counters
// (counters_test.cc). counter_kernels.cc is compiled with the access
// instrumentation (tandem_count_accesses), so its loads and stores are
// counted. Each launcher runs its kernel on one warp-sized block unless it
// says otherwise, on device buffers the caller allocated with cudaMalloc.
#ifndef TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_COUNTER_KERNELS_H_
#define TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_COUNTER_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda_emu::testing {

inline constexpr int kCounterLanes = 32;

// out[i] = in[i * stride] for i < blocks × 32 (float: 4-byte loads).
void LaunchStridedCopy(const float* in, float* out, int stride, int blocks);
// out[i] = in[i] with 8-byte (uint64_t) and 16-byte (uint4) elements.
void LaunchCopy8(const uint64_t* in, uint64_t* out);
void LaunchCopy16(const void* in, void* out);  // 32 × 16 bytes each
// Each lane writes then reads shared word lane × stride (floats), once in
// dynamic and once in static shared memory, and stores the sum to out[lane].
void LaunchSharedStride(int stride, float* out);
// Every lane reads shared word 0 (a broadcast).
void LaunchSharedBroadcast(float* out);
// A launch on `stream` declaring `flops` (TANDEM_LAUNCH_FLOPS) that writes
// out[lane].
void LaunchWithFlops(double flops, float* out, cudaStream_t stream);
// atomicAdd(counter, 1) from every lane.
void LaunchAtomicAdds(int* counter);

}  // namespace tandem::cuda_emu::testing

#endif  // TANDEM_TESTS_UNIT_KERNELS_CUDA_EMULATION_COUNTER_KERNELS_H_
