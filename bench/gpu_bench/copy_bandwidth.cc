#include "bench/gpu_bench/copy_bandwidth.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cuda/runtime/cuda_error.cuh"
#include "kernels/cuda/runtime/device_buffer.h"

namespace tandem::bench {

absl::StatusOr<double> MeasureCopyBandwidth(int64_t bytes, int repeats) {
  ASSIGN_OR_RETURN(cuda::DeviceBuffer src, cuda::DeviceBuffer::Allocate(bytes, "copy source"));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer dst, cuda::DeviceBuffer::Allocate(bytes, "copy target"));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaStreamCreate(&stream), "cudaStreamCreate"));
  cudaEvent_t start = nullptr, end = nullptr;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaEventCreate(&start), "cudaEventCreate"));
  RETURN_IF_ERROR(cuda::CudaStatus(cudaEventCreate(&end), "cudaEventCreate"));
  // Not zeros: the source holds a byte pattern (some copies are faster on zeros).
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMemsetAsync(src.data(), 0x5a, bytes, stream), "memset"));
  std::vector<float> ms;
  absl::Status status;
  for (int i = 0; i <= repeats && status.ok(); ++i) {
    status = cuda::CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
    if (status.ok()) {
      status = cuda::CudaStatus(
          cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream),
          "device-to-device copy");
    }
    if (status.ok()) status = cuda::CudaStatus(cudaEventRecord(end, stream), "cudaEventRecord");
    if (status.ok()) status = cuda::CudaStatus(cudaEventSynchronize(end), "cudaEventSynchronize");
    float t = 0;
    if (status.ok()) status = cuda::CudaStatus(cudaEventElapsedTime(&t, start, end), "elapsed");
    if (status.ok() && i > 0) ms.push_back(t);  // copy 0 warms up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  RETURN_IF_ERROR(status);
  if (ms.empty()) return absl::InvalidArgumentError("MeasureCopyBandwidth needs repeats >= 1");
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  const double seconds = std::max(1e-9, ms[ms.size() / 2] / 1e3);
  return 2.0 * static_cast<double>(bytes) / seconds / 1e9;
}

}  // namespace tandem::bench
