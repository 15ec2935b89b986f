// The CUDA runtime's plain types under emulation: dim3/uint3, uint4/float4, cudaError_t,
// cudaMemcpyKind, stream, event and graph handles. Names, values and layouts follow
// the real runtime headers so that one .cu source compiles both ways; only
// what tandem's kernels and backend use is declared.
//
// Included through kernels/cuda/runtime/cuda_compat.cuh with TANDEM_CUDA_EMULATION.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_CUDA_TYPES_H_
#define TANDEM_KERNELS_CUDA_EMULATION_CUDA_TYPES_H_

#ifndef TANDEM_CUDA_EMULATION
#error "kernels/cuda/emulation needs TANDEM_CUDA_EMULATION (link tandem_cuda_emulation)"
#endif

struct uint3 {
  unsigned int x, y, z;
};

// CUDA's 16-byte vector types (vector_types.h): 16-byte aligned, so that a
// load of one is a single 128-bit access on a GPU.
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

// As CUDA's dim3: unspecified extents are 1; converts from and to uint3.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// The real runtime's numeric values (driver_types.h), so logs read the same.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

// Opaque handles, as in the real runtime (pointers to incomplete structs; the
// emulator defines them).
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

inline constexpr int warpSize = 32;

#endif  // TANDEM_KERNELS_CUDA_EMULATION_CUDA_TYPES_H_
