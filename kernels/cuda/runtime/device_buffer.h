// DeviceBuffer: one owned allocation of device memory. Every device
// allocation of the CUDA backend goes through DeviceBuffer::Allocate, which
// counts them, so that a test can assert that a model step allocates nothing
// (all scratch is sized at load) by comparing DeviceAllocationCount() before
// and after.
//
// Under emulation (TANDEM_CUDA_EMULATION) "device memory" is the emulator's
// host memory (kernels/cuda/emulation/device_memory.h), poisoned when fresh.
//
// Thread-safety: the counter is atomic; a DeviceBuffer is not shared between
// threads without external synchronization.
#ifndef TANDEM_KERNELS_CUDA_RUNTIME_DEVICE_BUFFER_H_
#define TANDEM_KERNELS_CUDA_RUNTIME_DEVICE_BUFFER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// Successful DeviceBuffer::Allocate calls in this process so far.
int64_t DeviceAllocationCount();

// Free and total device memory (cudaMemGetInfo); INTERNAL when it fails.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of uninitialized device memory (0 gives an empty buffer and no
  // allocation). INVALID_ARGUMENT for bytes < 0; RESOURCE_EXHAUSTED naming
  // `what`, the bytes asked for and the device's free bytes when cudaMalloc
  // fails.
  static absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  // Copies `bytes` from host memory to offset `offset` of this buffer
  // (synchronous with respect to the host; on `stream`). INVALID_ARGUMENT
  // when the range is outside the buffer; INTERNAL when the copy fails.
  absl::Status Upload(const void* host, int64_t bytes, int64_t offset, cudaStream_t stream);
  // All of `host` to the start of this buffer, as Upload.
  template <typename T>
  absl::Status UploadAll(const std::vector<T>& host, cudaStream_t stream) {
    return Upload(host.data(), static_cast<int64_t>(host.size() * sizeof(T)), 0, stream);
  }

 private:
  DeviceBuffer(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  void Release();

  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_RUNTIME_DEVICE_BUFFER_H_
