// The CUDA runtime calls tandem's backend uses, on host memory (see
// device_memory.h). Signatures and error codes follow the CUDA runtime API.
// Work runs synchronously at the call: streams are in-order queues, so
// finishing each operation before the next is one valid schedule; stream
// and event synchronization have nothing left to wait for. As in CUDA, a
// call that fails also becomes the calling thread's last error
// (cudaGetLastError).
//
// What this cannot show: overlap between streams, timing, pinned-memory
// behaviour; an event's elapsed time is host wall-clock time.
//
// Thread-safety: thread-safe; the last error is per host thread.
#ifndef TANDEM_KERNELS_CUDA_EMULATION_RUNTIME_API_H_
#define TANDEM_KERNELS_CUDA_EMULATION_RUNTIME_API_H_

#include <cstddef>

#include "kernels/cuda/emulation/cuda_types.h"

cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
// Page-locked host memory: ordinary host memory under emulation, but copies
// from and to it count as pinned (counters.h), as on a GPU, where pageable
// copies are staged and synchronous.
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
// Device-side ranges must lie inside one cudaMalloc allocation and host-side
// pointers outside all of them (cudaErrorInvalidValue otherwise).
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

cudaError_t cudaDeviceSynchronize();
// kEmulatedDeviceCount devices, so that device selection (one GPU per rank
// of a tensor-parallel group) runs as on a multi-GPU node; they share one
// memory (device_memory.h). The current device is per host thread, as in
// CUDA; another ordinal is cudaErrorInvalidDevice.
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetLastError();     // returns and clears the last error
cudaError_t cudaPeekAtLastError();  // returns it, keeps it
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);

namespace tandem::cuda_emu {

inline constexpr int kEmulatedDeviceCount = 8;

// Whether `stream` is the default stream (null) or created and not destroyed.
bool IsValidStream(cudaStream_t stream);
// Stores `error` as the calling thread's last error unless it is cudaSuccess;
// returns it.
cudaError_t RecordError(cudaError_t error);

}  // namespace tandem::cuda_emu

#endif  // TANDEM_KERNELS_CUDA_EMULATION_RUNTIME_API_H_
