// cudaError_t -> absl::Status for the host-side launch functions of
// kernels/cuda: a failed launch or runtime call becomes INTERNAL naming the
// operation and CUDA's error name and text.
#ifndef TANDEM_KERNELS_CUDA_RUNTIME_CUDA_ERROR_CUH_
#define TANDEM_KERNELS_CUDA_RUNTIME_CUDA_ERROR_CUH_

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/runtime/cuda_compat.cuh"

namespace tandem::cuda {

// OK for cudaSuccess, else INTERNAL "<what>: <name> (<text>)".
inline absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s: %s (%s)", what, cudaGetErrorName(error), cudaGetErrorString(error)));
}

// The status of the launch just made on this host thread (cudaGetLastError,
// which also clears it): a bad configuration or stream shows here; faults
// while the kernel runs show at the stream's next synchronization.
inline absl::Status LaunchStatus(std::string_view kernel) {
  return CudaStatus(cudaGetLastError(), kernel);
}

}  // namespace tandem::cuda

#endif  // TANDEM_KERNELS_CUDA_RUNTIME_CUDA_ERROR_CUH_
