#include "kernels/cuda/emulation/runtime_api.h"

#include "kernels/cuda/emulation/graph.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

#include "absl/base/thread_annotations.h"
#include "kernels/cuda/emulation/counters.h"
#include "kernels/cuda/emulation/device_memory.h"

struct CUstream_st {};
struct CUevent_st {
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

namespace tandem::cuda_emu {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

// Live streams and events, so that a destroyed or foreign handle is refused.
struct Handles {
  std::mutex mutex;
  std::set<const void*> live ABSL_GUARDED_BY(mutex);

  void Add(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex);
    live.insert(handle);
  }
  bool Remove(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex);
    return live.erase(handle) == 1;
  }
  bool Contains(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex);
    return live.count(handle) == 1;
  }
};

Handles& Streams() {
  static Handles* handles = new Handles();
  return *handles;
}

Handles& Events() {
  static Handles* handles = new Handles();
  return *handles;
}

bool IsDeviceRange(const void* p, std::size_t bytes) {
  return DeviceMemory::Get().Contains(p, bytes);
}

bool IsHostPointer(const void* p) { return !DeviceMemory::Get().IsDevicePointer(p); }

// One side of a cudaMemcpyDefault copy: a pointer into device memory must
// keep its whole range inside that allocation.
bool DefaultSideValid(const void* p, std::size_t bytes) {
  return IsHostPointer(p) || IsDeviceRange(p, bytes);
}

cudaError_t CheckCopy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  bool valid = false;
  switch (kind) {
    case cudaMemcpyHostToHost:
      valid = IsHostPointer(dst) && IsHostPointer(src);
      break;
    case cudaMemcpyHostToDevice:
      valid = IsDeviceRange(dst, bytes) && IsHostPointer(src);
      break;
    case cudaMemcpyDeviceToHost:
      valid = IsHostPointer(dst) && IsDeviceRange(src, bytes);
      break;
    case cudaMemcpyDeviceToDevice:
      valid = IsDeviceRange(dst, bytes) && IsDeviceRange(src, bytes);
      break;
    case cudaMemcpyDefault:
      valid = DefaultSideValid(dst, bytes) && DefaultSideValid(src, bytes);
      break;
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
  return valid ? cudaSuccess : cudaErrorInvalidValue;
}

// cudaMallocHost's allocations (start -> bytes).
struct PinnedMemory {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> allocations ABSL_GUARDED_BY(mutex);

  bool Contains(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard<std::mutex> lock(mutex);
    auto it = allocations.upper_bound(a);
    return it != allocations.begin() && a < std::prev(it)->first + std::prev(it)->second;
  }
};

PinnedMemory& Pinned() {
  static PinnedMemory* pinned = new PinnedMemory();
  return *pinned;
}

// Counts a checked copy by where its ends are (counters.h).
void CountCopy(void* dst, const void* src, std::size_t bytes) {
  if (!CountersEnabled()) return;
  const bool from_device = !IsHostPointer(src);
  const bool to_device = !IsHostPointer(dst);
  CopyDirection direction = CopyDirection::kHostToHost;
  const void* host = nullptr;
  if (from_device && to_device) {
    direction = CopyDirection::kDeviceToDevice;
  } else if (to_device) {
    direction = CopyDirection::kHostToDevice;
    host = src;
  } else if (from_device) {
    direction = CopyDirection::kDeviceToHost;
    host = dst;
  }
  const bool pinned = host != nullptr && Pinned().Contains(host);
  counters_internal::OnCopy(direction, pinned, bytes);
}

// A copy as a stream runs it: checked, done, counted.
cudaError_t CopyNow(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return RecordError(cudaErrorInvalidValue);
  const cudaError_t error = CheckCopy(dst, src, bytes, kind);
  if (error != cudaSuccess) return RecordError(error);
  std::memmove(dst, src, bytes);
  CountCopy(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace

bool IsValidStream(cudaStream_t stream) { return stream == nullptr || Streams().Contains(stream); }

cudaError_t RecordError(cudaError_t error) {
  if (error != cudaSuccess) last_error = error;
  return error;
}

}  // namespace tandem::cuda_emu

using tandem::cuda_emu::DeviceMemory;
using tandem::cuda_emu::RecordError;

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  if (ptr == nullptr) return RecordError(cudaErrorInvalidValue);
  *ptr = DeviceMemory::Get().Allocate(bytes);
  return RecordError(*ptr == nullptr && bytes != 0 ? cudaErrorMemoryAllocation : cudaSuccess);
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  return RecordError(DeviceMemory::Get().Free(ptr) ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  if (ptr == nullptr) return RecordError(cudaErrorInvalidValue);
  *ptr = bytes == 0 ? nullptr : std::malloc(bytes);
  if (*ptr == nullptr) return RecordError(bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation);
  tandem::cuda_emu::PinnedMemory& pinned = tandem::cuda_emu::Pinned();
  std::lock_guard<std::mutex> lock(pinned.mutex);
  pinned.allocations[reinterpret_cast<std::uintptr_t>(*ptr)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  tandem::cuda_emu::PinnedMemory& pinned = tandem::cuda_emu::Pinned();
  {
    std::lock_guard<std::mutex> lock(pinned.mutex);
    if (pinned.allocations.erase(reinterpret_cast<std::uintptr_t>(ptr)) != 1) {
      return RecordError(cudaErrorInvalidValue);
    }
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  // Blocking: the host waits for the device (a graph's replayed copy does not).
  if (!tandem::cuda_emu::counters_internal::ReplayingGraph()) {
    tandem::cuda_emu::counters_internal::OnHostSync();
  }
  return tandem::cuda_emu::CopyNow(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  return tandem::cuda_emu::RunOrRecord(
      stream, [=] { return tandem::cuda_emu::CopyNow(dst, src, bytes, kind); });
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!DeviceMemory::Get().Contains(ptr, bytes)) return RecordError(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  tandem::cuda_emu::counters_internal::OnMemset(bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream) {
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  return tandem::cuda_emu::RunOrRecord(stream, [=] { return cudaMemset(ptr, value, bytes); });
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return RecordError(cudaErrorInvalidValue);
  const DeviceMemory& memory = DeviceMemory::Get();
  *total_bytes = memory.capacity_bytes();
  const std::size_t used = memory.used_bytes();
  *free_bytes = used < *total_bytes ? *total_bytes - used : 0;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (stream == nullptr) return RecordError(cudaErrorInvalidValue);
  *stream = new CUstream_st();
  tandem::cuda_emu::Streams().Add(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || !tandem::cuda_emu::Streams().Remove(stream)) {
    return RecordError(cudaErrorInvalidResourceHandle);
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!tandem::cuda_emu::IsValidStream(stream)) return RecordError(cudaErrorInvalidResourceHandle);
  if (tandem::cuda_emu::IsCapturing(stream)) {
    tandem::cuda_emu::InvalidateCapture(stream);
    return RecordError(cudaErrorStreamCaptureUnsupported);
  }
  tandem::cuda_emu::counters_internal::OnHostSync();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return RecordError(cudaErrorInvalidValue);
  *event = new CUevent_st();
  tandem::cuda_emu::Events().Add(*event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!tandem::cuda_emu::Events().Contains(event) || !tandem::cuda_emu::IsValidStream(stream)) {
    return RecordError(cudaErrorInvalidResourceHandle);
  }
  event->recorded = true;
  event->time = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  tandem::cuda_emu::counters_internal::OnHostSync();
  return RecordError(tandem::cuda_emu::Events().Contains(event) ? cudaSuccess
                                                                : cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return RecordError(cudaErrorInvalidValue);
  if (!tandem::cuda_emu::Events().Contains(start) || !tandem::cuda_emu::Events().Contains(end) ||
      !start->recorded || !end->recorded) {
    return RecordError(cudaErrorInvalidResourceHandle);
  }
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr || !tandem::cuda_emu::Events().Remove(event)) {
    return RecordError(cudaErrorInvalidResourceHandle);
  }
  delete event;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  tandem::cuda_emu::counters_internal::OnHostSync();
  return cudaSuccess;
}

namespace {
thread_local int current_device = 0;
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return RecordError(cudaErrorInvalidValue);
  *count = tandem::cuda_emu::kEmulatedDeviceCount;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= tandem::cuda_emu::kEmulatedDeviceCount) {
    return RecordError(cudaErrorInvalidDevice);
  }
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return RecordError(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t error = tandem::cuda_emu::last_error;
  tandem::cuda_emu::last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return tandem::cuda_emu::last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorIllegalState:
      return "the operation is not permitted when the stream is in its current state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
  }
  return "unrecognized error code";
}
