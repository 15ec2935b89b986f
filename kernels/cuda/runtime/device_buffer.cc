#include "kernels/cuda/runtime/device_buffer.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_format.h"
#include "kernels/cuda/runtime/cuda_error.cuh"

namespace tandem::cuda {
namespace {
std::atomic<int64_t> allocation_count{0};
}  // namespace

int64_t DeviceAllocationCount() { return allocation_count.load(); }

absl::StatusOr<DeviceMemoryInfo> QueryDeviceMemory() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  return DeviceMemoryInfo{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int64_t bytes, std::string_view what) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device buffer for %s: %d bytes is negative", what, bytes));
  }
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  const cudaError_t error = cudaMalloc(&data, static_cast<std::size_t>(bytes));
  if (error != cudaSuccess) {
    cudaGetLastError();  // a failed allocation is reported here, not left for the next launch
    int64_t free_bytes = -1;
    if (absl::StatusOr<DeviceMemoryInfo> info = QueryDeviceMemory(); info.ok()) {
      free_bytes = info->free_bytes;
    }
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot allocate %d bytes of device memory for %s (%s); the device has %d bytes free",
        bytes, what, cudaGetErrorName(error), free_bytes));
  }
  allocation_count.fetch_add(1);
  return DeviceBuffer(data, bytes);
}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

absl::Status DeviceBuffer::Upload(const void* host, int64_t bytes, int64_t offset,
                                  cudaStream_t stream) {
  if (bytes < 0 || offset < 0 || offset > bytes_ || bytes > bytes_ - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "upload of %d bytes at offset %d is outside the %d-byte device buffer", bytes, offset,
        bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(static_cast<char*>(data_) + offset, host,
                                    static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice,
                                    stream),
                    "upload to the device");
}

}  // namespace tandem::cuda
