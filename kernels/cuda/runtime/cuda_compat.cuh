// The one header every tandem .cu source includes. It makes one source
// compile two ways:
//
// - nvcc (__CUDACC__, TANDEM_CUDA_EMULATION not defined): the real CUDA
//   headers (<cuda_runtime.h>, <cuda_fp16.h>, <cuda_bf16.h>). Host code of
//   a real-GPU build (a .cc calling launch functions) gets them too.
// - the host compiler with TANDEM_CUDA_EMULATION (the tandem_cuda_emulation
//   target defines it): tandem's emulation of the CUDA execution model
//   (kernels/cuda/emulation/), where each CUDA thread of a block is a fiber
//   and barriers and warp intrinsics have CUDA's semantics, checked.
//
// Provided under emulation: __global__ __device__ __host__ __forceinline__
// __launch_bounds__(...) __align__(n) __constant__ __shared__
// (__restrict__ is the host compiler's own); dim3, uint3, uint4, float4, warpSize;
// threadIdx, blockIdx, blockDim, gridDim; __syncthreads, __syncwarp,
// __shfl_sync, __shfl_up_sync, __shfl_down_sync, __shfl_xor_sync,
// __ballot_sync, __any_sync, __all_sync, __activemask (device_intrinsics.h);
// atomics (atomics.h); __half, __nv_bfloat16 (half_types.h); fast-math and
// bit-cast intrinsics (math_intrinsics.h); the runtime API subset
// (runtime_api.h).
//
// Rules for sources that must build both ways:
// - Launch only with TANDEM_LAUNCH(kernel, grid, block, smem_bytes, stream,
//   args...), never with <<<...>>> (scripts/lint-cuda-kernels.py checks).
//   A template kernel with several template arguments needs an alias or a
//   wrapper, since the macro splits on commas.
// - Static shared memory: `__shared__ T name[N];` inside the kernel (or a
//   __device__ function). Under emulation __shared__ is `static
//   thread_local`: one instance per OS thread, and the emulator runs all of
//   a block's threads on one OS thread and one block at a time per OS
//   thread, so that is one instance per running block. Unlike on a GPU it
//   starts zeroed and keeps the previous block's values (initialize it
//   before reading, as CUDA requires anyway), and it cannot have a
//   non-trivial constructor.
// - Dynamic shared memory: TANDEM_DYNAMIC_SHARED(T, name); declares `T*
//   name` pointing at the block's dynamic shared memory (smem_bytes of the
//   launch, 16-byte aligned). Never `extern __shared__` directly. Under
//   emulation it is filled with 0xFF bytes at the start of every block.
// - TANDEM_LAUNCH_FLOPS(flops) right before a TANDEM_LAUNCH: the floating-
//   point operations that launch performs (multiply-add = 2), for the
//   emulator's counters (kernels/cuda/emulation/counters.h); nothing under
//   nvcc. TANDEM_LAUNCH_NAME("Name") likewise names the next launch in the
//   counters where the kernel is a variable (TANDEM_LAUNCH(kernel, ...)).
// - TANDEM_UNROLL before a loop of constant trip count that indexes a
//   register array: nvcc's `#pragma unroll` (a run-time index would move the
//   array to local memory); nothing under emulation.
// - Inline PTX, mma / wgmma, cp.async: only inside
//   `#ifndef TANDEM_CUDA_EMULATION` blocks, with a plain fallback in the
//   #else branch that the emulated tests run.
#ifndef TANDEM_KERNELS_CUDA_RUNTIME_CUDA_COMPAT_CUH_
#define TANDEM_KERNELS_CUDA_RUNTIME_CUDA_COMPAT_CUH_

#if !defined(TANDEM_CUDA_EMULATION)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define TANDEM_LAUNCH(kernel, grid, block, smem_bytes, stream, ...) \
  kernel<<<(grid), (block), (smem_bytes), (stream)>>>(__VA_ARGS__)
#define TANDEM_LAUNCH_FLOPS(flops) ((void)0)
#define TANDEM_LAUNCH_NAME(name) ((void)0)

#define TANDEM_DYNAMIC_SHARED(type, name)                                       \
  extern __shared__ __align__(16) unsigned char tandem_dynamic_shared_##name[]; \
  type* name = reinterpret_cast<type*>(tandem_dynamic_shared_##name)

#define TANDEM_UNROLL _Pragma("unroll")

#else  // TANDEM_CUDA_EMULATION

#include "kernels/cuda/emulation/atomics.h"
#include "kernels/cuda/emulation/cuda_types.h"
#include "kernels/cuda/emulation/device_intrinsics.h"
#include "kernels/cuda/emulation/graph.h"
#include "kernels/cuda/emulation/half_types.h"
#include "kernels/cuda/emulation/launch.h"
#include "kernels/cuda/emulation/math_intrinsics.h"
#include "kernels/cuda/emulation/runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
#define __shared__ static thread_local
#define TANDEM_UNROLL

#define TANDEM_LAUNCH(kernel, grid, block, smem_bytes, stream, ...)                  \
  ::tandem::cuda_emu::Launch(#kernel, kernel, dim3(grid), dim3(block), (smem_bytes), \
                             stream __VA_OPT__(, ) __VA_ARGS__)

#define TANDEM_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::tandem::cuda_emu::DynamicSharedMemory())
#define TANDEM_LAUNCH_FLOPS(flops) ::tandem::cuda_emu::DeclareLaunchFlops(flops)
#define TANDEM_LAUNCH_NAME(name) ::tandem::cuda_emu::DeclareLaunchName(name)

#endif

#endif  // TANDEM_KERNELS_CUDA_RUNTIME_CUDA_COMPAT_CUH_
